/**
 * What the anti-stub detector reports, and the heuristics its TypeScript and Python readers share
 * (placeholder error messages, to-do markers, names that promise work or promise none).
 */
export type StubKind =
  | 'empty-body'
  | 'not-implemented'
  | 'trivial-return'
  | 'pass-body'
  | 'ellipsis-body'
  | 'todo-marker'
  | 'parse-failed';

export type StubSeverity = 'block' | 'warn';

export interface StubFinding {
  readonly path: string;
  /** 1-based line of the finding. */
  readonly line: number;
  readonly kind: StubKind;
  /** `warn` only for `parse-failed` (the gate proceeds); everything else blocks. */
  readonly severity: StubSeverity;
  /** The source line, trimmed, at most 160 characters. */
  readonly excerpt: string;
  /** What is wrong, in words an agent can act on. */
  readonly message: string;
}

export interface SourceFile {
  readonly path: string;
  readonly content: string;
}



/** Messages of errors thrown as placeholders. Must start the message: "x is not implemented by the server" is a real error. */
export const NOT_IMPLEMENTED_MESSAGE = /^\W*(?:(?:method|function|feature|this)\s+)?(?:is\s+)?(?:not\s+(?:yet\s+)?implemented|unimplemented|todo\b|fixme\b|tbd\b|stub\b|implement\s+me)/i;
export const NOT_IMPLEMENTED_CLASS = /not_?implemented|unimplemented|^todo/i;
export const MARKER = /\b(?:todo|fixme)\s*[:(]/i;
export const UPPER_MARKER = /\b(?:TODO|FIXME|HACK|XXX)\b/;
/** Names of functions that are meant to do nothing (`noop`, `_sighandler_noop`, `ignoreErrors`, `defaultHandler`). */
export const NOOP_NAME = /no_?op(?![a-z])|^_*nop$|do_?nothing|^_+$|^_*(?:ignore|identity|empty|dummy|placeholder|null)|^_*default_?[A-Za-z]/i;
/**
 * Names that promise work (`parseInput`, `parse_input`, `Parse`): a literal answer from one is a
 * placeholder. The verb must end the name or be followed by a capital, `_` or a digit.
 */
export const WORK_NAME =
  /^_*(?:[Cc]ompute|[Cc]alc|[Cc]alculate|[Pp]arse|[Ff]etch|[Ll]oad|[Bb]uild|[Cc]reate|[Mm]ake|[Gg]enerate|[Pp]rocess|[Vv]alidate|[Vv]erify|[Ff]ind|[Ss]earch|[Ll]ookup|[Rr]esolve|[Tt]ransform|[Cc]onvert|[Rr]ender|[Hh]andle|[Ee]xecute|[Ee]xec|[Rr]un|[Aa]pply|[Mm]erge|[Rr]ead|[Ww]rite|[Ss]ave|[Ss]tore|[Ss]end|[Uu]pload|[Dd]ownload|[Qq]uery|[Aa]naly[sz]e|[Ee]xtract|[Ff]ormat|[Ss]erialize|[Dd]eserialize|[Ee]ncode|[Dd]ecode|[Ee]ncrypt|[Dd]ecrypt|[Hh]ash|[Ss]ign|[Nn]ormalize|[Ss]anitize|[Ss]lugify|[Ss]ort|[Ff]ilter|[Rr]educe|[Cc]ount|[Ss]um|[Tt]otal|[Aa]ggregate|[Ee]valuate|[Ss]core|[Rr]ank|[Cc]ompare|[Dd]iff|[Mm]atch|[Ss]plit|[Tt]ranslate|[Cc]ompile|[Aa]uthenticate|[Aa]uthorize|[Ll]ogin|[Rr]egister|[Ss]chedule|[Dd]ispatch|[Ss]ync|[Uu]pdate|[Dd]elete|[Rr]emove|[Ii]nsert|[Uu]psert|[Cc]ollect|[Ss]ummari[sz]e|[Ee]stimate|[Pp]redict|[Cc]lassify|[Dd]etect|[Ss]can|[Tt]okeni[sz]e|[Gg]et_?[Bb]y|[Ff]ind_?[Bb]y)(?=$|[A-Z_0-9])/;

export function markerIn(text: string): boolean {
  return UPPER_MARKER.test(text) || MARKER.test(text);
}

export function excerptOf(lines: readonly string[], line: number): string {
  return (lines[line - 1] ?? '').trim().slice(0, 160);
}

