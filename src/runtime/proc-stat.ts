// Moved to src/shared/proc-stat.ts; kept for the importers not yet switched over.
export { parseProcStat } from '../shared/proc-stat';
