-- name: compare_kernel_names
-- description: Kernel names and the operator type the dump gives them, for `traceql compare` to type the kernels of a run recorded without types (torch_npu Level0) by the other run's names.
-- column: run_id VARCHAR               -- run
-- column: name VARCHAR                 -- kernel name as the profiler wrote it
-- column: op_type VARCHAR              -- operator type the dump gives it
-- column: calls BIGINT                 -- kernels with this name and type
--
-- Definitions: kernels whose op_type is null or 'N/A' are left out (they are the ones to be typed).
SELECT run_id, name, op_type, count(*) AS calls
FROM kernels
WHERE op_type IS NOT NULL AND op_type <> 'N/A' AND name IS NOT NULL
GROUP BY ALL
ORDER BY run_id, calls DESC, name, op_type;
