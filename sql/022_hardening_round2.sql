-- Hardening, second round (SPEC R-SEC-3, R-AK-4, T-5):
--  * the publications trigger no longer trusts the session setting pgoutbox.publishing (any
--    session may set it): it accepts an INSERT only from the publishing statement of
--    outbox._publish_events, read from PostgreSQL's call stack, and still only for events whose
--    mandatory deliveries are all acknowledged. _publish_events stops setting it and pins its
--    search_path (it is then always named outbox._publish_events in that stack).
--  * the registry trigger's message names the table with its schema (inbox.consumer_roles was
--    reported as outbox.consumer_roles).
-- Both trigger functions are CREATE OR REPLACE (the triggers stay); no table changes, no locks
-- beyond the function catalog.
SET LOCAL ROLE outbox_owner;

{{ template "triggers/delivery_registry__immutable_function.sql" . }}
{{ template "triggers/outbox_publications__guarded_function.sql" . }}
DROP FUNCTION outbox._publish_events(uuid[], timestamptz);
{{ template "functions/_publish_events.sql" . }}

RESET ROLE;
