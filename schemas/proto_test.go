package schemas

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// These tests hold the hand-written codec to signal.proto: the .proto is
// parsed (a small parser for the subset it uses), turned into a descriptor,
// and protobuf-go's own dynamic messages encode and decode against ours.

var (
	reMessage = regexp.MustCompile(`^message (\w+) \{$`)
	reEnum    = regexp.MustCompile(`^enum (\w+) \{$`)
	reOneof   = regexp.MustCompile(`^oneof (\w+) \{$`)
	reField   = regexp.MustCompile(`^(\w+) (\w+) = (\d+);$`)
	reValue   = regexp.MustCompile(`^(\w+) = (\d+);$`)
	rePackage = regexp.MustCompile(`^package ([\w.]+);$`)
)

var scalarTypes = map[string]descriptorpb.FieldDescriptorProto_Type{
	"string": descriptorpb.FieldDescriptorProto_TYPE_STRING, "uint32": descriptorpb.FieldDescriptorProto_TYPE_UINT32,
	"sfixed64": descriptorpb.FieldDescriptorProto_TYPE_SFIXED64, "double": descriptorpb.FieldDescriptorProto_TYPE_DOUBLE,
}

func parseSignalProto(t *testing.T) protoreflect.FileDescriptor {
	t.Helper()
	src, err := os.ReadFile("signal.proto")
	if err != nil {
		t.Fatal(err)
	}
	fdp := &descriptorpb.FileDescriptorProto{Name: proto.String("signal.proto"), Syntax: proto.String("proto3")}
	var msg *descriptorpb.DescriptorProto
	var enum *descriptorpb.EnumDescriptorProto
	var oneof *int32
	for i, line := range strings.Split(string(src), "\n") {
		line, _, _ = strings.Cut(line, "//")
		line = strings.Join(strings.Fields(line), " ")
		if err := parseProtoLine(fdp, line, &msg, &enum, &oneof); err != nil {
			t.Fatalf("signal.proto:%d: %v", i+1, err)
		}
	}
	enums := map[string]bool{}
	for _, e := range fdp.EnumType {
		enums[e.GetName()] = true
	}
	for _, m := range fdp.MessageType {
		for _, f := range m.Field {
			if _, ok := scalarTypes[f.GetTypeName()]; ok {
				f.Type, f.TypeName = scalarTypes[f.GetTypeName()].Enum(), nil
				continue
			}
			f.Type = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
			if enums[f.GetTypeName()] {
				f.Type = descriptorpb.FieldDescriptorProto_TYPE_ENUM.Enum()
			}
			f.TypeName = proto.String("." + fdp.GetPackage() + "." + f.GetTypeName())
		}
	}
	fd, err := protodesc.NewFile(fdp, new(protoregistry.Files))
	if err != nil {
		t.Fatalf("signal.proto does not make a valid descriptor: %v", err)
	}
	return fd
}

func parseProtoLine(fdp *descriptorpb.FileDescriptorProto, line string,
	msg **descriptorpb.DescriptorProto, enum **descriptorpb.EnumDescriptorProto, oneof **int32) error {
	var m []string
	switch {
	case line == "" || line == `syntax = "proto3";`:
	case line == "}":
		switch {
		case *oneof != nil:
			*oneof = nil
		case *enum != nil:
			*enum = nil
		default:
			*msg = nil
		}
	case rePackage.MatchString(line):
		fdp.Package = proto.String(rePackage.FindStringSubmatch(line)[1])
	case reMessage.MatchString(line):
		*msg = &descriptorpb.DescriptorProto{Name: proto.String(reMessage.FindStringSubmatch(line)[1])}
		fdp.MessageType = append(fdp.MessageType, *msg)
	case reEnum.MatchString(line):
		*enum = &descriptorpb.EnumDescriptorProto{Name: proto.String(reEnum.FindStringSubmatch(line)[1])}
		fdp.EnumType = append(fdp.EnumType, *enum)
	case *msg != nil && reOneof.MatchString(line):
		(*msg).OneofDecl = append((*msg).OneofDecl, &descriptorpb.OneofDescriptorProto{Name: proto.String(reOneof.FindStringSubmatch(line)[1])})
		*oneof = proto.Int32(int32(len((*msg).OneofDecl) - 1))
	case *enum != nil && reValue.MatchString(line):
		m = reValue.FindStringSubmatch(line)
		n, _ := strconv.Atoi(m[2])
		(*enum).Value = append((*enum).Value, &descriptorpb.EnumValueDescriptorProto{Name: proto.String(m[1]), Number: proto.Int32(int32(n))})
	case *msg != nil && reField.MatchString(line):
		m = reField.FindStringSubmatch(line)
		n, _ := strconv.Atoi(m[3])
		(*msg).Field = append((*msg).Field, &descriptorpb.FieldDescriptorProto{
			Name: proto.String(m[2]), Number: proto.Int32(int32(n)), TypeName: proto.String(m[1]),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), OneofIndex: *oneof,
		})
	default:
		return fmt.Errorf("unsupported line %q", line)
	}
	return nil
}

// toDynamic builds the protobuf-go message for ev by .proto field names.
func toDynamic(fd protoreflect.FileDescriptor, ev *Event) *dynamicpb.Message {
	env := dynamicpb.NewMessage(fd.Messages().ByName("SignalEvent"))
	setField(env, "schema_version", protoreflect.ValueOfUint32(EventSchemaVersion))
	if ev.Kind == KindStatus {
		s := env.Mutable(env.Descriptor().Fields().ByName("status")).Message()
		st := &ev.Status
		setAll(s, map[string]protoreflect.Value{
			"engine": protoreflect.ValueOfString(st.Engine), "time_unix_nano": protoreflect.ValueOfInt64(st.TimeUnixNano),
			"health": protoreflect.ValueOfEnum(protoreflect.EnumNumber(st.Health)), "ready_replicas": protoreflect.ValueOfUint32(st.ReadyReplicas),
			"total_replicas": protoreflect.ValueOfUint32(st.TotalReplicas), "running": protoreflect.ValueOfUint32(st.Running),
			"waiting": protoreflect.ValueOfUint32(st.Waiting), "kv_cache_utilization": protoreflect.ValueOfFloat64(st.KVCacheUtilization),
		})
		return env
	}
	c := env.Mutable(env.Descriptor().Fields().ByName("completion")).Message()
	co := &ev.Completion
	setAll(c, map[string]protoreflect.Value{
		"engine": protoreflect.ValueOfString(co.Engine), "time_unix_nano": protoreflect.ValueOfInt64(co.TimeUnixNano),
		"conversation_id": protoreflect.ValueOfString(co.ConversationID), "cluster": protoreflect.ValueOfString(co.Cluster),
		"prompt_tokens": protoreflect.ValueOfUint32(co.PromptTokens), "cached_prompt_tokens": protoreflect.ValueOfUint32(co.CachedPromptTokens),
		"output_tokens": protoreflect.ValueOfUint32(co.OutputTokens), "ttft_ms": protoreflect.ValueOfFloat64(co.TTFTMs),
		"tbot_ms": protoreflect.ValueOfFloat64(co.TBOTMs), "error": protoreflect.ValueOfString(co.Error),
		"model": protoreflect.ValueOfString(co.Model),
	})
	return env
}

func setAll(m protoreflect.Message, vals map[string]protoreflect.Value) {
	for name, v := range vals {
		setField(m, name, v)
	}
}

func setField(m protoreflect.Message, name string, v protoreflect.Value) {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic("signal.proto has no field " + name + " in " + string(m.Descriptor().Name()))
	}
	m.Set(fd, v)
}

func TestCodecMatchesProto(t *testing.T) {
	fd := parseSignalProto(t)
	failed := sampleCompletion()
	failed.Completion.Error = "timeout"
	withModel := sampleCompletion()
	withModel.Completion.Model = "llama-3-70b"
	for name, ev := range map[string]Event{"status": sampleStatus(), "completion": sampleCompletion(), "failed": failed, "model": withModel} {
		t.Run(name, func(t *testing.T) {
			ours, err := AppendEvent(nil, &ev)
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := proto.MarshalOptions{Deterministic: true}.Marshal(toDynamic(fd, &ev))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ours, theirs) {
				t.Errorf("encoding differs from protobuf-go:\n ours %x\ntheirs %x", ours, theirs)
			}
			// protobuf-go reads ours back to an equal message.
			back := dynamicpb.NewMessage(fd.Messages().ByName("SignalEvent"))
			if err := proto.Unmarshal(ours, back); err != nil {
				t.Fatalf("protobuf-go cannot decode our bytes: %v", err)
			}
			if !proto.Equal(back, toDynamic(fd, &ev)) {
				t.Errorf("protobuf-go decoded %v", back)
			}
		})
	}
}

func TestProtoFieldNumbersMatchCodec(t *testing.T) {
	fd := parseSignalProto(t)
	want := map[string]int{
		"SignalEvent.schema_version": int(fieldEventVersion), "SignalEvent.status": int(fieldEventStatus),
		"SignalEvent.completion": int(fieldEventCompletion), "EngineStatus.kv_cache_utilization": int(fieldStatusKVUtilization),
		"Completion.error": int(fieldCompError), "Completion.tbot_ms": int(fieldCompTBOT),
		"Completion.model": int(fieldCompModel),
	}
	for key, num := range want {
		msg, field, _ := strings.Cut(key, ".")
		f := fd.Messages().ByName(protoreflect.Name(msg)).Fields().ByName(protoreflect.Name(field))
		if f == nil || int(f.Number()) != num {
			t.Errorf("%s: .proto has %v, codec uses %d", key, f, num)
		}
	}
	if n := fd.Messages().ByName("Completion").Fields().Len(); n != 11 {
		t.Errorf("Completion has %d fields in signal.proto, codec knows 11", n)
	}
	if n := fd.Messages().ByName("EngineStatus").Fields().Len(); n != 8 {
		t.Errorf("EngineStatus has %d fields in signal.proto, codec knows 8", n)
	}
}
