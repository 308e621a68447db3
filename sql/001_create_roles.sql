-- Roles and database-level grants (SPEC R-SEC-1).
{{ template "roles/create_roles.sql" . }}
