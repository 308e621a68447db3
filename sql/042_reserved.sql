-- Placeholder: migration 042 belongs to another branch merged beside this one (issue 37/38 helper
-- uses 043 and 044). The coordinator drops this file when the real 042 is merged.
SELECT 1;
