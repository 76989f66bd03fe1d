// Prints what the suite's own summary leaves out: every failing or warning
// check with its message, marked `baseline` (listed in the expected-failures
// file), `not scored` (a scenario the requirement set runs but does not
// count) or `UNEXPECTED`, then the totals. A CI log then says what went wrong
// without opening the results directory.
//
// Usage: node summary.mjs <results dir> <expected-failures.yaml> <revision>

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import YAML from 'yaml';

const [dir, baselineFile, revision] = process.argv.slice(2);
const baseline = new Set(YAML.parse(readFileSync(baselineFile, 'utf-8'))?.server ?? []);
const requirements = YAML.parse(readFileSync(
  new URL(`./node_modules/@modelcontextprotocol/conformance/requirements/${revision}.yaml`, import.meta.url),
  'utf-8',
));
const scored = new Set(requirements.server ?? []);

const files = [];
(function walk(d) {
  for (const name of readdirSync(d)) {
    const path = join(d, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (name === 'checks.json') files.push(path);
  }
})(dir);

const totals = {};
const lines = [];
for (const file of files.sort()) {
  const scenario = relative(dir, file).split('/')[0]
    .replace(/^server-/, '').replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, '');
  for (const c of JSON.parse(readFileSync(file, 'utf-8'))) {
    totals[c.status] = (totals[c.status] ?? 0) + 1;
    if (c.status !== 'FAILURE' && c.status !== 'WARNING') continue;
    const id = `${scenario}:${c.id}`;
    const mark = baseline.has(id) || baseline.has(scenario) ? 'baseline'
      : scored.has(scenario) ? 'UNEXPECTED' : 'not scored';
    const why = (c.errorMessage ?? c.description ?? '').split('\n')[0].slice(0, 200);
    lines.push([mark, `  [${mark}] ${c.status} ${id}: ${why}`]);
  }
}
const order = { UNEXPECTED: 0, baseline: 1, 'not scored': 2 };
lines.sort((a, b) => order[a[0]] - order[b[0]]);
console.log(`Failing or warning checks:\n${lines.map((l) => l[1]).join('\n') || '  none'}`);
console.log(`\n${files.length} scenarios run; checks: ${Object.entries(totals).map(([k, v]) => `${v} ${k.toLowerCase()}`).join(', ')}`);
