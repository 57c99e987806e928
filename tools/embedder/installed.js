// Exits 0 when node_modules holds exactly the packages package-lock.json
// pins, each at its locked version, and 1 otherwise, naming the first
// difference on stderr: make tools runs npm ci only then.
//
//   node installed.js
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = path.dirname(fileURLToPath(import.meta.url));
const read = (p) => JSON.parse(readFileSync(path.join(dir, p), 'utf8'));

try {
  const lock = read('package-lock.json');
  for (const [p, entry] of Object.entries(lock.packages)) {
    if (p === '' || entry.optional) continue;
    const { version } = read(path.join(p, 'package.json'));
    if (version !== entry.version) {
      throw new Error(`${p} is ${version}, the lockfile pins ${entry.version}`);
    }
  }
} catch (err) {
  process.stderr.write(`tools/embedder: ${err.message}\n`);
  process.exit(1);
}
