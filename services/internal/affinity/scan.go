package affinity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// A request body is parsed on every request that has no X-Conversation-Id,
// so it is scanned by hand rather than decoded by reflection: one pass
// that validates the whole body as encoding/json would, reads the few
// fields routing needs, and keeps the rest as slices of the body (no
// copies of message contents). Its results equal encoding/json's into
// wireBody for every input, errors included (FuzzScanMatchesEncodingJSON):
// keys match case-insensitively, null leaves a field as it was, the last
// of duplicate keys wins.

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

var errSyntax = errors.New("invalid JSON")

// message is one chat message as scanned: its role and the raw bytes of
// its content (a slice of the body).
type message struct {
	role    string
	content []byte
}

// scanned is what a body says, as wireBody holds it.
type scanned struct {
	user, cluster, model string
	messages             []message
}

type scanner struct {
	b     []byte
	i     int
	depth int
}

// scanBody validates body and reads its routing fields.
func scanBody(body []byte) (scanned, error) {
	s := scanner{b: body}
	var out scanned
	s.ws()
	if s.literal("null") {
		return out, s.end()
	}
	if !s.peek('{') {
		if err := s.skip(); err != nil {
			return out, err
		}
		return out, errors.New("the body is not a JSON object")
	}
	err := s.object(func(key []byte) error { return s.topField(key, &out) })
	if err != nil {
		return scanned{}, err
	}
	return out, s.end()
}

// end checks that only whitespace follows the value.
func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return fmt.Errorf("%w: data after the top-level value at offset %d", errSyntax, s.i)
	}
	return nil
}

func (s *scanner) topField(key []byte, out *scanned) error {
	switch {
	case bytes.EqualFold(key, []byte("user")):
		return s.stringField(&out.user)
	case bytes.EqualFold(key, []byte("cluster")):
		return s.stringField(&out.cluster)
	case bytes.EqualFold(key, []byte("model")):
		return s.stringField(&out.model)
	case bytes.EqualFold(key, []byte("messages")):
		return s.messages(&out.messages)
	}
	return s.skip()
}

// roles are the roles every chat repeats, shared rather than copied per
// message.
var roles = [...]string{"system", "developer", "user", "assistant", "tool", "function"}

// roleField is stringField for a role: a common one is not copied.
func (s *scanner) roleField(dst *string) error {
	if s.literal("null") {
		return nil
	}
	if !s.peek('"') {
		return s.typeError("string")
	}
	raw, esc, err := s.str()
	if err != nil {
		return err
	}
	r := decodeString(raw, esc, false)
	for _, k := range roles {
		if r == k {
			*dst = k
			return nil
		}
	}
	*dst = strings.Clone(r)
	return nil
}

// stringField reads a string into dst; null leaves dst as it is.
func (s *scanner) stringField(dst *string) error {
	if s.literal("null") {
		return nil
	}
	if !s.peek('"') {
		return s.typeError("string")
	}
	raw, esc, err := s.str()
	if err != nil {
		return err
	}
	*dst = decodeString(raw, esc, true)
	return nil
}

// messages reads the messages array; null empties it.
func (s *scanner) messages(dst *[]message) error {
	if s.literal("null") {
		*dst = nil
		return nil
	}
	if !s.peek('[') {
		return s.typeError("array")
	}
	// As encoding/json does, elements are decoded over what a previous
	// "messages" key left at the same index (duplicate keys).
	old := *dst
	msgs := old[:0]
	err := s.array(func() error {
		var m message
		if i := len(msgs); i < len(old) {
			m = old[i]
		}
		switch {
		case s.literal("null"):
		case s.peek('{'):
			if err := s.object(func(key []byte) error { return s.messageField(key, &m) }); err != nil {
				return err
			}
		default:
			return s.typeError("object")
		}
		msgs = append(msgs, m)
		return nil
	})
	*dst = msgs
	return err
}

func (s *scanner) messageField(key []byte, m *message) error {
	switch {
	case bytes.EqualFold(key, []byte("role")):
		return s.roleField(&m.role)
	case bytes.EqualFold(key, []byte("content")):
		start := s.i
		if err := s.skip(); err != nil {
			return err
		}
		m.content = bytes.TrimRight(s.b[start:s.i], " \t\n\r")
		return nil
	}
	return s.skip()
}

// typeError is a value of the wrong type; the value is still checked
// first so that a syntax error wins, as in encoding/json.
func (s *scanner) typeError(want string) error {
	if err := s.skip(); err != nil {
		return err
	}
	return fmt.Errorf("a routing field is not a %s", want)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek(c byte) bool { return s.i < len(s.b) && s.b[s.i] == c }

// literal consumes lit (true, false, null) if it comes next.
func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		s.ws()
		return true
	}
	return false
}

// object walks an object, calling field for each key with the scanner at
// the key's value, which field must consume.
func (s *scanner) object(field func(key []byte) error) error {
	if err := s.enter('{'); err != nil {
		return err
	}
	if s.peek('}') {
		return s.leave()
	}
	for {
		if !s.peek('"') {
			return fmt.Errorf("%w: want a key at offset %d", errSyntax, s.i)
		}
		raw, esc, err := s.str()
		if err != nil {
			return err
		}
		key := raw
		if esc {
			key = []byte(decodeString(raw, esc, false))
		}
		if !s.peek(':') {
			return fmt.Errorf("%w: want ':' at offset %d", errSyntax, s.i)
		}
		s.i++
		s.ws()
		if err := field(key); err != nil {
			return err
		}
		if done, err := s.next('}'); done || err != nil {
			return err
		}
	}
}

// array walks an array, calling elem with the scanner at each element.
func (s *scanner) array(elem func() error) error {
	if err := s.enter('['); err != nil {
		return err
	}
	if s.peek(']') {
		return s.leave()
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		if done, err := s.next(']'); done || err != nil {
			return err
		}
	}
}

func (s *scanner) enter(open byte) error {
	if s.depth++; s.depth > maxDepth {
		return fmt.Errorf("%w: nested too deep", errSyntax)
	}
	s.i++
	s.ws()
	return nil
}

func (s *scanner) leave() error {
	s.i++
	s.depth--
	s.ws()
	return nil
}

// next consumes a ',' (false) or the closing byte (true).
func (s *scanner) next(closing byte) (bool, error) {
	switch {
	case s.peek(','):
		s.i++
		s.ws()
		return false, nil
	case s.peek(closing):
		return true, s.leave()
	}
	return false, fmt.Errorf("%w: want ',' or %q at offset %d", errSyntax, closing, s.i)
}

// skip consumes and checks one value of any kind.
func (s *scanner) skip() error {
	if s.i >= len(s.b) {
		return fmt.Errorf("%w: unexpected end", errSyntax)
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(func([]byte) error { return s.skip() })
	case c == '[':
		return s.array(s.skip)
	case c == '"':
		_, _, err := s.str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case s.literal("true"), s.literal("false"), s.literal("null"):
		return nil
	}
	return fmt.Errorf("%w: unexpected %q at offset %d", errSyntax, s.b[s.i], s.i)
}

// str consumes a string and returns its raw contents (between the
// quotes) and whether it has escapes.
func (s *scanner) str() ([]byte, bool, error) {
	start := s.i + 1
	esc := false
	for i := start; i < len(s.b); i++ {
		switch c := s.b[i]; {
		case c == '"':
			s.i = i + 1
			s.ws()
			return s.b[start:i], esc, nil
		case c == '\\':
			n, ok := escapeLen(s.b[i:])
			if !ok {
				return nil, false, fmt.Errorf("%w: bad escape at offset %d", errSyntax, i)
			}
			esc = true
			i += n - 1
		case c < 0x20:
			return nil, false, fmt.Errorf("%w: control character in a string at offset %d", errSyntax, i)
		}
	}
	return nil, false, fmt.Errorf("%w: unterminated string", errSyntax)
}

// escapeLen is the length of the escape at the start of b.
func escapeLen(b []byte) (int, bool) {
	if len(b) < 2 {
		return 0, false
	}
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, true
	case 'u':
		if len(b) < 6 {
			return 0, false
		}
		for _, h := range b[2:6] {
			if !isHex(h) {
				return 0, false
			}
		}
		return 6, true
	}
	return 0, false
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// number consumes a JSON number.
func (s *scanner) number() error {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return fmt.Errorf("%w: bad number at offset %d", errSyntax, s.i)
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			return fmt.Errorf("%w: bad number at offset %d", errSyntax, s.i)
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return fmt.Errorf("%w: bad number at offset %d", errSyntax, s.i)
		}
		i = j
	}
	s.i = i
	s.ws()
	return nil
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// decodeString is a scanned string's value as encoding/json gives it
// (escapes resolved, invalid UTF-8 replaced). Plain valid text is used in
// place: copied when keep (the value outlives the body), else viewed.
func decodeString(raw []byte, esc, keep bool) string {
	if !esc && utf8.Valid(raw) {
		if keep {
			return string(raw)
		}
		return view(raw)
	}
	quoted := make([]byte, 0, len(raw)+2)
	quoted = append(append(append(quoted, '"'), raw...), '"')
	var out string
	_ = json.Unmarshal(quoted, &out) // raw was validated by str
	return out
}

// view is b as a string without a copy, for hashing and comparing while
// b is neither changed nor kept.
func view(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
