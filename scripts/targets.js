'use strict'
// The release targets, read from package.json's `napi` config, with every name derived from them
// the way napi-rs v3 derives it (`napi create-npm-dirs`, the generated binding.js): the platform
// package `<name>-linux-x64-gnu` in npm/linux-x64-gnu/, the addon `<binaryName>.linux-x64-gnu.node`.
// Shared by build-all.js, pack.js and the packaging tests, so there is one spelling of each.

const path = require('node:path')

const repo = path.resolve(__dirname, '..')
const pkg = require(path.join(repo, 'package.json'))

const ARCH = { x86_64: 'x64', aarch64: 'arm64' }
/** What readelf -h prints as "Machine:" for each node arch. */
const ELF_MACHINE = { x64: 'Advanced Micro Devices X86-64', arm64: 'AArch64' }
/** The dynamic loader a program of this arch/libc asks for (musl names its own). */
const MUSL_LOADER = { x64: 'ld-musl-x86_64.so.1', arm64: 'ld-musl-aarch64.so.1' }
/** The oldest glibc the gnu builds may need: they are linked against it with zig. */
const GLIBC_BASELINE = '2.17'

function describe(triple) {
  const m = /^(x86_64|aarch64)-unknown-linux-(gnu|musl)$/.exec(triple)
  if (!m) throw new Error(`scripts/targets.js knows Linux x86_64/aarch64 gnu/musl triples only, not ${triple}`)
  const arch = ARCH[m[1]]
  const abi = m[2]
  const platformArchABI = `linux-${arch}-${abi}`
  return {
    triple,
    arch,
    abi,
    /** glibc for the npm `libc` field, musl as is. */
    libc: abi === 'gnu' ? 'glibc' : 'musl',
    platformArchABI,
    /** What `napi build -x` (cargo-zigbuild) is given: gnu pinned to the glibc baseline. */
    buildTarget: abi === 'gnu' ? `${triple}.${GLIBC_BASELINE}` : triple,
    nodeFile: `${pkg.napi.binaryName}.${platformArchABI}.node`,
    packageName: `${pkg.name}-${platformArchABI}`,
    npmDir: path.join(repo, 'npm', platformArchABI),
    elfMachine: ELF_MACHINE[arch],
    muslLoader: MUSL_LOADER[arch],
  }
}

const targets = pkg.napi.targets.map(describe)

/** The target this Node runs on, or null when the release builds none for it. */
function hostTarget() {
  const glibc = process.report && process.report.getReport().header.glibcVersionRuntime
  const abi = glibc ? 'gnu' : 'musl'
  return targets.find((t) => t.arch === process.arch && t.abi === abi && process.platform === 'linux') || null
}

module.exports = { repo, pkg, targets, describe, hostTarget, GLIBC_BASELINE }
