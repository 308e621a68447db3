package pgcall

import "context"

const bindConsumerRoleSQL = `SELECT inbox.bind_consumer_role($1::text, $2::text)`

// BindConsumerRole calls inbox.bind_consumer_role: members of role may act as consumerName in
// the inbox functions, nobody else (SPEC R-SEC-5). Insert-or-compare; 22023 for an unknown or
// kernel role, 42710 when the name is bound to another role. Caller role: outbox_registrar.
func BindConsumerRole(ctx context.Context, db DBTX, consumerName, role string) error {
	_, err := db.Exec(ctx, bindConsumerRoleSQL, consumerName, role)
	return interpretError("bind consumer role", err)
}
