package consumerfix

import (
	"encoding/json"
)

// JSONUnmarshal is json.Unmarshal, named so the tests that decode receipts read alike.
func JSONUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
