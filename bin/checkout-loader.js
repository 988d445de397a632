// A checkout's TypeScript runs through tsx; its packages (node_modules) load through Node's own
// loader, as they do in the installed package, which runs on Node alone. tsx's loader would read
// each package file a second time and lex the ones that mention import or export for ES module
// syntax, in a WebAssembly memory that grows to fit the largest file it is given and is never
// given back: 36.5 MB for the TypeScript compiler (9 MB of JavaScript), held for the life of the
// process.
const Module = require('node:module');
const path = require('node:path');

const NODE_MODULES = `${path.sep}node_modules${path.sep}`;
const nodeLoadsJs = Module._extensions['.js'];
require('tsx/cjs');
const tsxLoadsJs = Module._extensions['.js'];
Module._extensions['.js'] = function loadJs(module, filename) {
  return (filename.includes(NODE_MODULES) ? nodeLoadsJs : tsxLoadsJs).call(this, module, filename);
};
