package pgcall

import (
	"context"
	"encoding/json"
)

// ReceiptMember is one registered member of a receipt kind (outbox.receipt_kind_members):
// its JSON type (string, integer or boolean), whether every receipt carries it, and the
// optional bounds (Minimum for integers, MaxLength for strings) the kernel enforces (OB002).
type ReceiptMember struct {
	Type      string `json:"type"`
	Required  bool   `json:"required"`
	Minimum   *int64 `json:"minimum,omitempty"`
	MaxLength *int   `json:"maxLength,omitempty"`
}

// ReceiptKindParams are the arguments of outbox.register_receipt_kind (SPEC R-AK-1a, §13).
type ReceiptKindParams struct {
	ReceiptKind          string
	ReceiptType          string
	FieldPrefix          string // the receipt's members <prefix>Ref, <prefix>Digest, ...
	TimeField            string
	ReceiptSchemaVersion int
	Members              map[string]ReceiptMember
	RequiresProjection   bool
}

const registerReceiptKindSQL = `SELECT outbox.register_receipt_kind($1::text, $2::text, $3::text, $4::text, $5::integer, $6::json, $7::boolean)`

// RegisterReceiptKind calls outbox.register_receipt_kind: insert-or-compare of a receipt kind
// and its members (the same definition again is a no-op; another or a malformed one is OB101,
// ErrDefinitionInvalid). Caller role: outbox_registrar.
func RegisterReceiptKind(ctx context.Context, db DBTX, p ReceiptKindParams) error {
	members := p.Members
	if members == nil {
		members = map[string]ReceiptMember{}
	}
	doc, err := json.Marshal(members)
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, registerReceiptKindSQL, p.ReceiptKind, p.ReceiptType, p.FieldPrefix, p.TimeField,
		p.ReceiptSchemaVersion, string(doc), p.RequiresProjection)
	return interpretError("register receipt kind", err)
}
