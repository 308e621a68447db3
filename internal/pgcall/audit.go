package pgcall

import "context"

// KernelRoles are the roles of SPEC R-SEC-1, in the order the audit prints them.
var KernelRoles = []string{"outbox_owner", "outbox_registrar", "outbox_producer", "outbox_dispatcher",
	"outbox_consumer", "outbox_auditor", "outbox_operator", "outbox_retention", "outbox_mailbox",
	"outbox_intake", "outbox_observation_projector", "outbox_projector"}

// GrantRow is one cell of the grant matrix: what a role may do with one object.
type GrantRow struct {
	Kind   string // schema, table, view, sequence, function
	Object string // schema-qualified name (functions with argument types)
	Role   string // a kernel role or PUBLIC
	Privs  string // comma-separated privileges, "-" for none
}

const grantMatrixSQL = `
WITH roles(role, ord) AS (
    SELECT r, o FROM unnest($1::text[]) WITH ORDINALITY AS t(r, o)
    UNION ALL SELECT 'PUBLIC', 1000
), objs AS (
    SELECT 'schema' AS kind, n.nspname::text AS object, n.oid AS oid, 'n' AS k
    FROM pg_catalog.pg_namespace n WHERE n.nspname IN ('outbox', 'inbox', 'mailbox', 'intake')
    UNION ALL
    SELECT CASE c.relkind WHEN 'v' THEN 'view' WHEN 'S' THEN 'sequence' ELSE 'table' END,
           n.nspname || '.' || c.relname, c.oid, c.relkind::text
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname IN ('outbox', 'inbox', 'mailbox', 'intake') AND c.relkind IN ('r', 'v', 'p', 'S', 'm')
    UNION ALL
    SELECT 'function', p.oid::regprocedure::text, p.oid, 'f'
    FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname IN ('outbox', 'inbox', 'mailbox', 'intake')
)
SELECT o.kind, o.object, r.role,
       coalesce(nullif(array_to_string(ARRAY(
           SELECT priv FROM unnest(CASE o.k
               WHEN 'n' THEN ARRAY['USAGE', 'CREATE']
               WHEN 'f' THEN ARRAY['EXECUTE']
               WHEN 'S' THEN ARRAY['USAGE', 'SELECT', 'UPDATE']
               ELSE ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER'] END) AS priv
           WHERE CASE o.k
               WHEN 'n' THEN pg_catalog.has_schema_privilege(CASE r.role WHEN 'PUBLIC' THEN 'public' ELSE r.role END, o.oid, priv)
               WHEN 'f' THEN pg_catalog.has_function_privilege(CASE r.role WHEN 'PUBLIC' THEN 'public' ELSE r.role END, o.oid, priv)
               WHEN 'S' THEN pg_catalog.has_sequence_privilege(CASE r.role WHEN 'PUBLIC' THEN 'public' ELSE r.role END, o.oid, priv)
               ELSE pg_catalog.has_table_privilege(CASE r.role WHEN 'PUBLIC' THEN 'public' ELSE r.role END, o.oid, priv) END
       ), ','), ''), '-')
       || coalesce((SELECT ' columns(' || string_agg(a.attname || ':' || cp.p, ' ' ORDER BY a.attname, cp.p) || ')'
                    FROM pg_catalog.pg_attribute a
                    CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE']) AS cp(p)
                    WHERE o.k IN ('r', 'p', 'v') AND a.attrelid = o.oid AND a.attnum > 0 AND NOT a.attisdropped
                      AND r.role <> 'PUBLIC' AND r.role <> 'outbox_owner'
                      AND NOT pg_catalog.has_table_privilege(r.role, o.oid, cp.p)
                      AND pg_catalog.has_column_privilege(r.role, o.oid, a.attnum, cp.p)), '')
FROM objs o CROSS JOIN roles r
ORDER BY o.kind, o.object, r.ord`

// GrantMatrix returns, for every schema, table, view, sequence and function of the outbox,
// inbox, mailbox and intake schemas, what each kernel role and PUBLIC may do (effective privileges, including
// column-level grants). The order is stable so the output can be diffed (SPEC R-SEC-4).
func GrantMatrix(ctx context.Context, db DBTX) ([]GrantRow, error) {
	rows, err := db.Query(ctx, grantMatrixSQL, KernelRoles)
	if err != nil {
		return nil, interpretError("grant matrix", err)
	}
	defer rows.Close()
	var out []GrantRow
	for rows.Next() {
		var g GrantRow
		if err := rows.Scan(&g.Kind, &g.Object, &g.Role, &g.Privs); err != nil {
			return nil, interpretError("grant matrix", err)
		}
		out = append(out, g)
	}
	return out, interpretError("grant matrix", rows.Err())
}

// TriggerRow is one trigger on a kernel table.
type TriggerRow struct {
	Table, Name, Timing, Events, Level, Function string
	Deferrable                                   bool
}

const triggersSQL = `
SELECT n.nspname || '.' || c.relname, t.tgname,
       CASE WHEN t.tgtype & 2 <> 0 THEN 'BEFORE' WHEN t.tgtype & 64 <> 0 THEN 'INSTEAD OF' ELSE 'AFTER' END,
       array_to_string(ARRAY(SELECT e FROM (VALUES (4, 'INSERT'), (16, 'UPDATE'), (8, 'DELETE'), (32, 'TRUNCATE')) v(bit, e)
                             WHERE t.tgtype & v.bit <> 0), ' OR '),
       CASE WHEN t.tgtype & 1 <> 0 THEN 'ROW' ELSE 'STATEMENT' END,
       t.tgfoid::regproc::text, t.tgdeferrable
FROM pg_catalog.pg_trigger t
JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname IN ('outbox', 'inbox', 'mailbox', 'intake') AND NOT t.tgisinternal
ORDER BY 1, 2`

// Triggers lists the non-internal triggers on the kernel's tables in a stable order.
func Triggers(ctx context.Context, db DBTX) ([]TriggerRow, error) {
	rows, err := db.Query(ctx, triggersSQL)
	if err != nil {
		return nil, interpretError("triggers", err)
	}
	defer rows.Close()
	var out []TriggerRow
	for rows.Next() {
		var r TriggerRow
		if err := rows.Scan(&r.Table, &r.Name, &r.Timing, &r.Events, &r.Level, &r.Function, &r.Deferrable); err != nil {
			return nil, interpretError("triggers", err)
		}
		out = append(out, r)
	}
	return out, interpretError("triggers", rows.Err())
}

// ConsumerBinding is one row of inbox.consumer_roles: the role whose members may act as a
// consumer name in the inbox functions (SPEC R-SEC-5).
type ConsumerBinding struct {
	ConsumerName string
	Role         string
	BoundBy      string
}

const consumerBindingsSQL = `SELECT consumer_name, role_name::text, bound_by::text FROM inbox.consumer_roles ORDER BY consumer_name`

// ConsumerBindings lists inbox.consumer_roles. Caller role: outbox_auditor.
func ConsumerBindings(ctx context.Context, db DBTX) ([]ConsumerBinding, error) {
	rows, err := db.Query(ctx, consumerBindingsSQL)
	if err != nil {
		return nil, interpretError("consumer bindings", err)
	}
	defer rows.Close()
	var out []ConsumerBinding
	for rows.Next() {
		var b ConsumerBinding
		if err := rows.Scan(&b.ConsumerName, &b.Role, &b.BoundBy); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, interpretError("consumer bindings", rows.Err())
}
