package consumer

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/oceanway/pgoutbox/wire"
)

// The 200 answer writes the kit's canonical ack and receipt as they are: byte for byte what
// encoding the wire.HTTPSuccessBody produces (issue 36 item 2: the receipt text is built once).
func TestWriteSuccessSameBytesAsEncoder(t *testing.T) {
	t.Parallel()
	cases := [][2]string{
		{`{"appliedReceipt":{"kind":"k"},"eventId":"e"}`, `{"a":"<tag>&\u2028é","b":1,"c":true,"d":"q\"\\\n"}`},
		{`{}`, `{"x":[1,{"y":"z"}]}`},
		{"{\"a\":\"\u2028\u2029<>&\"}", "{\"b\":\"\u00e9\u20ac\"}"}, // literal U+2028/2029, not escaped by either
	}
	for _, c := range cases {
		fast, slow := httptest.NewRecorder(), httptest.NewRecorder()
		writeSuccess(fast, json.RawMessage(c[0]), json.RawMessage(c[1]))
		writeJSON(slow, 200, wire.HTTPSuccessBody{Ack: json.RawMessage(c[0]), Receipt: json.RawMessage(c[1])})
		if fast.Body.String() != slow.Body.String() || fast.Code != slow.Code ||
			fast.Header().Get("Content-Type") != slow.Header().Get("Content-Type") ||
			fast.Header().Get("Cache-Control") != slow.Header().Get("Cache-Control") {
			t.Fatalf("direct %d %q, encoder %d %q", fast.Code, fast.Body.String(), slow.Code, slow.Body.String())
		}
	}
}
