package extproc

import (
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/ilb-router/ilb/services/dataplane"
)

// The endpoint picker protocol's names (GIE, docs/proposals/004).
const (
	// HeaderDestination is the request header, and the key in the
	// MetadataNamespace dynamic metadata, naming the picked endpoints.
	HeaderDestination = "x-gateway-destination-endpoint"
	// MetadataNamespace is the dynamic-metadata namespace of the pick and
	// of the served endpoint.
	MetadataNamespace = "envoy.lb"
	// SubsetNamespace and SubsetKey locate the gateway's subset hint in
	// the request's filter metadata.
	SubsetNamespace = "envoy.lb.subset_hint"
	SubsetKey       = "x-gateway-destination-endpoint-subset"
	// ServedKey, in MetadataNamespace, is the endpoint that served the
	// request, on the response path.
	ServedKey = "x-gateway-destination-endpoint-served"
)

// MaxChunkBytes is the largest body chunk streamed back to the gateway,
// as GIE's picker does (Envoy recommends at most 64 KiB).
const MaxChunkBytes = 62000

// headerValue is a header's value: Envoy sends raw_value, older ones
// value.
func headerValue(h *corev3.HeaderValue) string {
	if len(h.GetRawValue()) > 0 {
		return string(h.GetRawValue())
	}
	return h.GetValue()
}

// overwrite is a header set that replaces any value the client sent, so a
// client cannot choose its own destination.
func overwrite(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: key, RawValue: []byte(value)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}

// pickMutation is the response part that routes the request: the
// destination header (route cache cleared so the new header counts) and
// the same list in dynamic metadata.
func pickMutation(pk *dataplane.ExternalPick) (*extprocv3.CommonResponse, *structpb.Struct) {
	list := strings.Join(pk.Endpoints, ",")
	common := &extprocv3.CommonResponse{ClearRouteCache: true,
		HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{overwrite(HeaderDestination, list)}}}
	md := &structpb.Struct{Fields: map[string]*structpb.Value{
		MetadataNamespace: structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			HeaderDestination: structpb.NewStringValue(list),
		}}),
	}}
	return common, md
}

// requestHeadersResponse answers the request headers with common.
func requestHeadersResponse(common *extprocv3.CommonResponse, md *structpb.Struct) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{DynamicMetadata: md,
		Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{Response: common}}}
}

// requestBodyResponse answers a request body message with common.
func requestBodyResponse(common *extprocv3.CommonResponse, md *structpb.Struct) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{DynamicMetadata: md,
		Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{Response: common}}}
}

// streamedChunk is one piece of a body sent back in FULL_DUPLEX_STREAMED
// mode, on the request or the response path.
func streamedChunk(response bool, body []byte, eos bool) *extprocv3.ProcessingResponse {
	br := &extprocv3.BodyResponse{Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
		Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{Body: body, EndOfStream: eos}}}}}
	if response {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: br}}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: br}}
}

// chunks splits body into pieces of at most MaxChunkBytes, calling emit
// for each with eos on the last piece only when eos is set (an empty
// body is one empty piece, so the end of stream is still sent).
func chunks(body []byte, eos bool, emit func(piece []byte, eos bool) error) error {
	for {
		n := min(len(body), MaxChunkBytes)
		last := n == len(body)
		if err := emit(body[:n], eos && last); err != nil {
			return err
		}
		if last {
			return nil
		}
		body = body[n:]
	}
}

// immediate is the answer that ends a request at the gateway: the status,
// a JSON body in OpenAI's error envelope, and Retry-After when given.
func immediate(e *dataplane.RouteError) *extprocv3.ProcessingResponse {
	hs := []*corev3.HeaderValueOption{overwrite("content-type", "application/json")}
	if e.RetryAfter != "" {
		hs = append(hs, overwrite("retry-after", e.RetryAfter))
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(e.Status)},
			Headers: &extprocv3.HeaderMutation{SetHeaders: hs},
			Body:    e.Body(),
			Details: "ilb_" + e.Code,
		}}}
}

// continueResponse lets a message through unchanged.
func continueResponse(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	common := &extprocv3.CommonResponse{}
	switch req.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return requestHeadersResponse(common, nil)
	case *extprocv3.ProcessingRequest_RequestBody:
		return requestBodyResponse(common, nil)
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
			ResponseHeaders: &extprocv3.HeadersResponse{Response: common}}}
	case *extprocv3.ProcessingRequest_ResponseBody:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
			ResponseBody: &extprocv3.BodyResponse{Response: common}}}
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{
			RequestTrailers: &extprocv3.TrailersResponse{}}}
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{
			ResponseTrailers: &extprocv3.TrailersResponse{}}}
	}
	return nil
}

// metadataStrings reads a list of strings at namespace/key of the
// request's filter metadata: a list value, or a comma-separated string
// (what a header-to-metadata filter writes). ok is false when absent.
func metadataStrings(req *extprocv3.ProcessingRequest, namespace, key string) (out []string, ok bool) {
	ns, found := req.GetMetadataContext().GetFilterMetadata()[namespace]
	if !found {
		return nil, false
	}
	v, found := ns.GetFields()[key]
	if !found {
		return nil, false
	}
	add := func(s string) {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	switch x := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		add(x.StringValue)
	case *structpb.Value_ListValue:
		for _, item := range x.ListValue.GetValues() {
			add(item.GetStringValue())
		}
	}
	return out, true
}
