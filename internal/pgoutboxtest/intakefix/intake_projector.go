package intakefix

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/oceanway/pgoutbox/internal/pgcall"
	"github.com/oceanway/pgoutbox/internal/pgoutboxtest/testfix"
)

// SHA256Hex is the hex SHA-256 of s.
func SHA256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// AcceptN accepts n new observations on conn and returns their ids.
func AcceptN(t *testing.T, conn pgcall.DBTX, n int) []string {
	t.Helper()
	docs := make([]json.RawMessage, n)
	ids := make([]string, n)
	for i := range docs {
		ids[i] = testfix.NewUUID()
		docs[i] = JSON(t, Sub(ids[i]))
	}
	for _, o := range Accept(t, conn, docs...) {
		Want(t, o, "accepted_new", "")
	}
	return ids
}
