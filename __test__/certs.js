'use strict'
// A test CA and a server certificate made with the openssl CLI, for loopback HTTPS servers: the
// egress and network tests' and the benchmark's proxy row. Nothing here is trusted outside the
// run's temp dir.

const fs = require('fs')
const path = require('path')
const { spawnSync } = require('child_process')

/** Why loopback TLS cannot be set up here, or null. */
function opensslMissing() {
  const r = spawnSync('openssl', ['version'], { stdio: 'ignore' })
  return r.status === 0 ? null : 'the openssl CLI is not installed'
}

function openssl(dir, args) {
  const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`)
}

/** A CA and a certificate for `names` (EC P-256), written in `dir`: { ca, key, cert } as PEM. */
function makeCerts(dir, names) {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes']
  const ca = ['-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=kern-sandbox test CA']
  const caExt = ['-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']
  openssl(dir, ['req', '-x509', ...ec, ...ca, ...caExt])
  openssl(dir, ['req', ...ec, '-keyout', 'srv.key', '-out', 'srv.csr', '-subj', `/CN=${names[0]}`])
  const san = names.map((n) => `DNS:${n}`).join(',')
  fs.writeFileSync(
    path.join(dir, 'ext.cnf'),
    `subjectAltName=${san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n`,
  )
  const sign = ['-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'srv.pem', '-days', '2']
  openssl(dir, ['x509', '-req', '-in', 'srv.csr', ...sign, '-extfile', 'ext.cnf'])
  const read = (f) => fs.readFileSync(path.join(dir, f), 'utf8')
  return { ca: read('ca.pem'), caFile: path.join(dir, 'ca.pem'), key: read('srv.key'), cert: read('srv.pem') }
}

module.exports = { opensslMissing, makeCerts }
