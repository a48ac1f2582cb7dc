package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ilb-router/ilb/schemas"
)

// EnsureTopics creates the topics that do not exist yet with the given
// partition count and replication factor (-1 for either: the broker's
// default). Topics that already exist are left as they are, whatever
// their partition count. Errors for several topics are joined, in topic
// order.
func EnsureTopics(ctx context.Context, cl *kgo.Client, partitions int32, replication int16, topics ...string) error {
	if len(topics) == 0 {
		return nil
	}
	if partitions == 0 || partitions < -1 || replication == 0 || replication < -1 {
		return fmt.Errorf("kafka: ensure topics: partitions %d and replication %d must be positive or -1", partitions, replication)
	}
	for _, t := range topics {
		if err := schemas.ValidTopicName(t); err != nil {
			return fmt.Errorf("kafka: ensure topics: %w", err)
		}
	}
	// kadm.NewClient shares cl; closing it would close cl, so we do not.
	resps, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, replication, nil, topics...)
	if err != nil {
		return fmt.Errorf("kafka: create topics: %w", err)
	}
	var errs []error
	for _, r := range resps.Sorted() {
		if r.Err == nil || errors.Is(r.Err, kerr.TopicAlreadyExists) {
			continue
		}
		errs = append(errs, fmt.Errorf("kafka: create topic %s: %w (%s)", r.Topic, r.Err, r.ErrMessage))
	}
	return errors.Join(errs...)
}
