// Shared by the tests: temporary directories, BigInt-safe JSON, the peers' Python.
import { mkdtempSync, rmSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const made = []
process.on('exit', () => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true })
})

/** A fresh directory, removed when the test process exits. */
export function tempDir(prefix = 'cryo-node-') {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  made.push(dir)
  return dir
}

/** JSON.stringify that writes BigInts (snapshot ids) as numbers' digits in strings. */
export function stringify(value) {
  return JSON.stringify(value, (_key, v) => (typeof v === 'bigint' ? v.toString() : v))
}

/** Peers are required (CI: scripts/test.sh sets CRYO_REQUIRE_PEERS=1): a missing one fails. */
export const requirePeers = process.env.CRYO_REQUIRE_PEERS === '1'

/** The peers venv's python with the `cryo` package, or a reason why there is none. */
export function peersPython() {
  const python = process.env.PEERS_PYTHON
  if (!python) return { reason: 'PEERS_PYTHON is not set (source ~/.cache/cryo-peers/peers.env)' }
  if (!existsSync(python)) return { reason: `PEERS_PYTHON ${python} does not exist` }
  return { python }
}
