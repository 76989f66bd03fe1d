// Prints a short summary of a conformance run: one line per scenario with its
// check counts, then every failing or warning check with its message, so a
// CI log says what went wrong without opening the results directory.
//
// Usage: node summary.mjs <results dir given to `conformance server -o`>

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2];
const files = [];
(function walk(d) {
  for (const name of readdirSync(d)) {
    const path = join(d, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (name === 'checks.json') files.push(path);
  }
})(dir);

const totals = { SUCCESS: 0, FAILURE: 0, WARNING: 0, SKIPPED: 0, INFO: 0 };
const problems = [];
for (const file of files.sort()) {
  const scenario = file.slice(dir.length + 1).split('/')[0]
    .replace(/^server-/, '').replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, '');
  const checks = JSON.parse(readFileSync(file, 'utf-8'));
  const count = (s) => checks.filter((c) => c.status === s).length;
  for (const s of Object.keys(totals)) totals[s] += count(s);
  const bad = checks.filter((c) => c.status === 'FAILURE' || c.status === 'WARNING');
  console.log(`${bad.length ? '✗' : '✓'} ${scenario}: ${count('SUCCESS')} ok, ${count('FAILURE')} failed, ${count('WARNING')} warnings, ${count('SKIPPED')} skipped`);
  for (const c of bad) {
    problems.push(`  ${c.status} ${scenario}:${c.id}: ${(c.errorMessage ?? c.description ?? '').split('\n')[0].slice(0, 300)}`);
  }
}
console.log(`\n${files.length} scenarios; checks: ${Object.entries(totals).map(([k, v]) => `${v} ${k.toLowerCase()}`).join(', ')}`);
if (problems.length) console.log(`\nFailing or warning checks (baselined ones included):\n${problems.join('\n')}`);
