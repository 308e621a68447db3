package transport

import (
	"fmt"

	"github.com/oceanway/pgoutbox/receipt"
)

// A transport may need what the dispatcher loads from the database at preflight, or answer for
// the consumer itself. It says so by implementing the optional interfaces below; the dispatcher
// treats every transport alike (no transport is a special case) and asks only these questions.

// CodesUser is a transport that classifies error answers itself (HTTP): the dispatcher hands it
// the normalized error codes it loaded at preflight.
type CodesUser interface {
	SetCodes(c *Codes)
}

// ReceiptCatalogUser is a transport that builds receipts itself (JetStream): the dispatcher
// hands it the receipt catalog it loaded at preflight.
type ReceiptCatalogUser interface {
	SetReceiptCatalog(c *receipt.Catalog)
}

// ReceiptBuilder is a transport that answers with receipts it builds itself rather than with the
// consumer's (JetStream builds a broker_publication receipt from the PubAck, SPEC R-AK-1):
// ReceiptKind names that kind. A destination it serves must have exactly that receipt kind.
type ReceiptBuilder interface {
	ReceiptKind() string
}

// transportBuiltKinds are the receipt kinds only a ReceiptBuilder can produce: a destination of
// such a kind served by any other transport could never be acknowledged.
var transportBuiltKinds = map[string]bool{BrokerReceiptKind: true}

// CheckReceiptKind returns why t cannot serve a destination whose registered receipt kind is
// kind ("" when it can).
func CheckReceiptKind(t Transport, kind string) string {
	if b, ok := t.(ReceiptBuilder); ok {
		if own := b.ReceiptKind(); own != kind {
			return fmt.Sprintf("its transport builds %s receipts but the destination's receipt kind is %s", own, kind)
		}
		return ""
	}
	if transportBuiltKinds[kind] {
		return fmt.Sprintf("receipt kind %s is built by the transport itself, and this destination's transport builds no receipts", kind)
	}
	return ""
}

// Prepare hands t what it asked for (CodesUser, ReceiptCatalogUser): the dispatcher calls it for
// every transport after loading the catalogs.
func Prepare(t Transport, codes *Codes, receipts *receipt.Catalog) {
	if u, ok := t.(CodesUser); ok {
		u.SetCodes(codes)
	}
	if u, ok := t.(ReceiptCatalogUser); ok {
		u.SetReceiptCatalog(receipts)
	}
}

// ReceiptKind is the kind of the receipts JetStream builds (broker_publication).
func (j *JetStream) ReceiptKind() string { return BrokerReceiptKind }
