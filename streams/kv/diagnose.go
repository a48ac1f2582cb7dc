package kv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotPermitted: the NATS server refused an operation because this
// connection's user lacks the permission (a read-only data plane writing
// weights, say). Retrying does not help; the user's permissions must
// change.
var ErrNotPermitted = errors.New("kv: not permitted")

// connLogging returns the connection event handlers. A connection closed
// by the server for good (wrong credentials, an expired JWT) is logged
// at Error with the server's reason and what to check: without it the
// only trace would be later calls failing with "connection closed".
func connLogging(log *slog.Logger) []nats.Option {
	return []nats.Option{
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("nats: disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats: reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("nats: async error", withHintAttr(err)...)
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); closedBy(err) {
				log.Error("nats: connection closed by the server; no more reconnects", withHintAttr(err)...)
				return
			}
			log.Info("nats: connection closed")
		}),
	}
}

// closedBy reports whether err, a closed connection's last error, is why
// it closed. Transient errors (a refused publish, a slow consumer) leave
// the connection open, so after one the program closed it itself.
func closedBy(err error) bool {
	return err != nil && !errors.Is(err, nats.ErrPermissionViolation) &&
		!errors.Is(err, nats.ErrSlowConsumer) && !errors.Is(err, nats.ErrMaxSubscriptionsExceeded)
}

// hint says what to check for err, or "" when there is nothing specific.
// It matches the server's words, which nats.go passes on in varying case
// and not always as its sentinel errors.
func hint(err error) string {
	if err == nil {
		return ""
	}
	s := strings.ToLower(err.Error())
	switch {
	case strings.Contains(s, "expired"), strings.Contains(s, "revoked"):
		return "the user's or account's JWT has expired or was revoked: issue a new creds file"
	case strings.Contains(s, "authorization violation"), strings.Contains(s, "authentication"):
		return "the server refused the credentials: check the user and password (in the URL or the password file), " +
			"the NKey seed or the creds file, and that the server's accounts know this user"
	case strings.Contains(s, "permissions violation"):
		return "this NATS user lacks a permission for the subject named: compare its publish and subscribe " +
			"permissions with deploy/nats/nats.conf"
	case strings.Contains(s, "x509"), strings.Contains(s, "tls"), strings.Contains(s, "certificate"):
		return "TLS failed: check the CA bundle, the client certificate and key, and that the URL scheme " +
			"(tls:// or nats://) is what the server expects"
	case strings.Contains(s, "connection refused"), strings.Contains(s, "no servers available"):
		return "nothing answers at that address: is NATS running there?"
	}
	return ""
}

// withHintAttr returns the log attributes of err: the error and, when
// there is one, its hint.
func withHintAttr(err error) []any {
	if h := hint(err); h != "" {
		return []any{"err", err, "hint", h}
	}
	return []any{"err", err}
}

// withHint appends hint(err) to err's message, keeping err in the chain.
func withHint(err error) error {
	if h := hint(err); h != "" {
		return fmt.Errorf("%w (%s)", err, h)
	}
	return err
}

// ConnError reports why nc cannot serve requests: nil while it is
// connected. A closed connection never comes back; its error matches
// nats.ErrConnectionClosed and, when the server closed it, carries the
// server's reason (for example "nats: authorization violation") and what
// to check. A reconnecting connection reports that, with its last error
// if it has one. Services show it where they report health.
func ConnError(nc *nats.Conn) error {
	if nc == nil {
		return errors.New("kv: no NATS connection")
	}
	st, last := nc.Status(), nc.LastError()
	switch {
	case st == nats.CONNECTED || st == nats.DRAINING_SUBS || st == nats.DRAINING_PUBS:
		return nil
	case st == nats.CLOSED && closedBy(last):
		return withHint(fmt.Errorf("kv: %w by the server: %w", nats.ErrConnectionClosed, last))
	case st == nats.CLOSED:
		return fmt.Errorf("kv: %w", nats.ErrConnectionClosed)
	case last != nil:
		return withHint(fmt.Errorf("kv: NATS %s; last error: %w", strings.ToLower(st.String()), last))
	}
	return fmt.Errorf("kv: NATS %s", strings.ToLower(st.String()))
}

// refused turns err into ErrNotPermitted when it is a timeout and nc's
// last error is the server refusing this client a subject containing
// subject. nats.go reports a refused publish only asynchronously, so the
// request that made it just times out; this puts the reason in its error.
func refused(nc *nats.Conn, err error, subject string) error {
	if nc == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)) {
		return err
	}
	last := nc.LastError()
	if !errors.Is(last, nats.ErrPermissionViolation) || !strings.Contains(last.Error(), subject) {
		return err
	}
	return fmt.Errorf("%w: %w (%s)", ErrNotPermitted, last, hint(last))
}

// connJetStream is the JetStream context Connect returns. The buckets it
// opens remember their connection, so that Put can tell a write the
// server refused from a slow server (see refused).
type connJetStream struct{ jetstream.JetStream }

// connBucket is a bucket opened through connJetStream.
type connBucket struct {
	jetstream.KeyValue
	nc *nats.Conn
}

func (j connJetStream) KeyValue(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	return j.bucket(j.JetStream.KeyValue(ctx, bucket))
}

func (j connJetStream) CreateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return j.bucket(j.JetStream.CreateKeyValue(ctx, cfg))
}

func (j connJetStream) UpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return j.bucket(j.JetStream.UpdateKeyValue(ctx, cfg))
}

func (j connJetStream) CreateOrUpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return j.bucket(j.JetStream.CreateOrUpdateKeyValue(ctx, cfg))
}

func (j connJetStream) bucket(kv jetstream.KeyValue, err error) (jetstream.KeyValue, error) {
	if err != nil {
		return nil, err
	}
	return connBucket{KeyValue: kv, nc: j.Conn()}, nil
}

// connOf returns the connection of a bucket opened through Connect's
// JetStream context, or nil.
func connOf(kv jetstream.KeyValue) *nats.Conn {
	if b, ok := kv.(connBucket); ok {
		return b.nc
	}
	return nil
}
