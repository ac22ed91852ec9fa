-- name: unreadable_values
-- description: Values a dump refers to that could not be read and were stored as NULL (an SQLite STRING_IDS string past TRACEQL_MAX_STRING_BYTES, or NULL there): the names, types or shapes that refer to them are NULL.
-- param: run_id VARCHAR          -- run to check
-- column: rank INTEGER           -- rank whose file held them
-- column: file VARCHAR           -- the dump file
-- column: field VARCHAR          -- table.column
-- column: n_values BIGINT        -- values stored as NULL
-- column: example VARCHAR        -- the first one, and why
SELECT rank,
       json_extract_string(value, '$.file') AS file,
       json_extract_string(value, '$.field') AS field,
       CAST(json_extract(value, '$.values') AS BIGINT) AS n_values,
       json_extract_string(value, '$.example') AS example
FROM run_meta
WHERE run_id = $run_id AND key LIKE 'traceql.unreadable_values.%'
ORDER BY rank, file, field;
