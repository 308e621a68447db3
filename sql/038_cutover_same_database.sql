-- Cutover refused across databases (issue 24 item 4; SPEC R-PV-2, §11b OB810): cutover_projection
-- raises OB810, before writing anything, when the boundary's consumer is neither bound in this
-- database's inbox.consumer_roles nor has any receipt of the projection in this database's inbox
-- (its projector writes receipts elsewhere: the guards here could only read an empty inbox).
-- Same signature; the function is replaced in place.
SET LOCAL ROLE outbox_owner;

DROP FUNCTION outbox.cutover_projection(uuid, uuid, integer, integer, text, text);
{{ template "functions/cutover_projection.sql" . }}

RESET ROLE;
