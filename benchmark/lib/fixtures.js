'use strict'
// Fixtures for the benchmark: workspaces with many files, the snapshot data set, and the fake
// "kern" programs the output rows need. Everything lives under one temp directory that run.js
// removes at the end.

const fs = require('fs')
const path = require('path')
const crypto = require('crypto')
const { spawnSync } = require('child_process')

const MiB = 1024 * 1024

/** A workspace with `count` small files, `perDir` per directory (10,000 → 100 dirs × 100). */
function manyFiles(dir, count, perDir = 100) {
  fs.mkdirSync(dir, { recursive: true })
  const body = Buffer.alloc(100, 'x')
  for (let i = 0; i < count; i++) {
    const sub = path.join(dir, `d${String(Math.floor(i / perDir)).padStart(3, '0')}`)
    if (i % perDir === 0) fs.mkdirSync(sub, { recursive: true })
    fs.writeFileSync(path.join(sub, `f${String(i).padStart(5, '0')}.txt`), body)
  }
  return dir
}

/** CSV-ish text that compresses about 3-4× (like real tabular output). */
function csvChunk(bytes, seed) {
  const rows = []
  let len = 0
  let x = seed >>> 0 || 1
  const rnd = () => {
    x ^= x << 13
    x >>>= 0
    x ^= x >>> 17
    x ^= x << 5
    x >>>= 0
    return x
  }
  while (len < bytes) {
    const row = `${rnd() % 100000},${(rnd() % 1000000) / 1000},sensor-${rnd() % 64},${rnd() % 2 ? 'ok' : 'warn'},2025-01-${String((rnd() % 28) + 1).padStart(2, '0')}T12:00:00Z\n`
    rows.push(row)
    len += row.length
  }
  return Buffer.from(rows.join('')).subarray(0, bytes)
}

/**
 * The snapshot data set: 200 MiB in 4 large files (2 × 50 MiB random bytes, like images or
 * archives that do not compress; 2 × 50 MiB CSV text, compressible ~3-4×) plus 2,000 small text
 * files of 1-4 KiB in 20 directories.
 */
function snapshotData(dir, { bigMiB = 200, small = 2000 } = {}) {
  fs.mkdirSync(path.join(dir, 'data'), { recursive: true })
  const each = Math.floor((bigMiB * MiB) / 4)
  for (let i = 0; i < 2; i++) {
    const fd = fs.openSync(path.join(dir, 'data', `blob-${i}.bin`), 'w')
    for (let off = 0; off < each; off += 4 * MiB) fs.writeSync(fd, crypto.randomBytes(Math.min(4 * MiB, each - off)))
    fs.closeSync(fd)
    fs.writeFileSync(path.join(dir, 'data', `table-${i}.csv`), csvChunk(each, 1234 + i))
  }
  for (let i = 0; i < small; i++) {
    const sub = path.join(dir, `notes${String(Math.floor(i / 100)).padStart(2, '0')}`)
    if (i % 100 === 0) fs.mkdirSync(sub, { recursive: true })
    const size = 1024 + ((i * 7919) % 3072)
    fs.writeFileSync(path.join(sub, `n${String(i).padStart(4, '0')}.md`), csvChunk(size, i + 1))
  }
  return dir
}

function du(dir) {
  let bytes = 0
  let files = 0
  const stack = [dir]
  while (stack.length) {
    const d = stack.pop()
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name)
      if (e.isDirectory()) stack.push(p)
      else if (e.isFile()) {
        bytes += fs.statSync(p).size
        files++
      }
    }
  }
  return { bytes, files }
}

function script(file, body) {
  fs.writeFileSync(file, body, { mode: 0o755 })
  return file
}

/** A fake kern that ignores its argv and writes `bytes` zero bytes to stdout. */
function floodKern(dir, bytes) {
  return script(path.join(dir, 'fake-kern-flood'), `#!/bin/sh\nexec head -c ${bytes} /dev/zero\n`)
}

const CHUNK_C = (n) => `#include <stdio.h>
#include <unistd.h>
/* A fake kern: ignores argv, writes ${n} distinct lines, one write(2) each. */
int main(void) {
  char b[32];
  for (int i = 0; i < ${n}; i++) {
    int len = snprintf(b, sizeof b, "chunk %07d\\n", i);
    if (write(1, b, len) != len) return 1;
  }
  return 0;
}
`

/** The exact bytes the chunk writer produces, for the in-order check. */
function chunkLine(i) {
  return `chunk ${String(i).padStart(7, '0')}\n`
}

/** A fake kern that writes `n` distinct lines ("chunk 0000000\n" …), one write(2) per line.
 * Compiled C when a C compiler is around, else a Python writer (slower: the row then measures
 * mostly Python). Returns { bin, kind }. */
function chunkKern(dir, n) {
  const src = path.join(dir, 'fake-kern-chunks.c')
  const bin = path.join(dir, 'fake-kern-chunks')
  fs.writeFileSync(src, CHUNK_C(n))
  for (const cc of ['cc', 'gcc', 'clang']) {
    const r = spawnSync(cc, ['-O2', '-o', bin, src], { stdio: 'ignore' })
    if (r.status === 0) return { bin, kind: `C writer (${cc}), one write(2) per line` }
  }
  script(bin, `#!/usr/bin/env python3\nimport os\nfor i in range(${n}):\n    os.write(1, b"chunk %07d\\n" % i)\n`)
  return { bin, kind: 'Python writer, one os.write per line' }
}

/** A fake kern that records its argv (NUL-separated) and its --env-file's content, then exits 0.
 * Used to learn the exact argv our binding builds for the "bare kern" comparison. */
function argvRecorderKern(dir) {
  const out = path.join(dir, 'recorded-argv')
  return {
    bin: script(
      path.join(dir, 'fake-kern-record'),
      `#!/bin/sh
printf '%s\\0' "$@" > '${out}'
prev=
for a in "$@"; do
  if [ "$prev" = "--env-file" ]; then cat "$a" > '${out}.env'; fi
  prev=$a
done
exit 0
`,
    ),
    out,
  }
}

const FLOOR_C = `#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
extern char **environ;
/* The floor under any binding: posix_spawn + waitpid of argv[1]. For each number read from stdin,
 * that many calls, one time in ms per line, then a line "end": a worker takes turns with it block
 * by block (measure/calls.js). */
int main(int argc, char **argv) {
  char *args[] = {argv[1], 0};
  pid_t p;
  int st, n;
  struct timespec a, b;
  while (argc > 1 && scanf("%d", &n) == 1) {
    for (int i = 0; i < n; i++) {
      clock_gettime(CLOCK_MONOTONIC, &a);
      if (posix_spawn(&p, argv[1], 0, 0, args, environ)) return 1;
      waitpid(p, &st, 0);
      clock_gettime(CLOCK_MONOTONIC, &b);
      printf("%.6f\\n", (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6);
    }
    printf("end\\n");
    fflush(stdout);
  }
  return 0;
}
`

/** A C program timing posix_spawn + waitpid of a program: what a call costs with no binding at
 * all. null without a C compiler. */
function spawnFloor(dir) {
  const src = path.join(dir, 'spawn-floor.c')
  const bin = path.join(dir, 'spawn-floor')
  fs.writeFileSync(src, FLOOR_C)
  for (const cc of ['cc', 'gcc', 'clang']) {
    if (spawnSync(cc, ['-O2', '-o', bin, src], { stdio: 'ignore' }).status === 0) return bin
  }
  return null
}

module.exports = { MiB, spawnFloor, manyFiles, snapshotData, du, floodKern, chunkKern, chunkLine, argvRecorderKern }
