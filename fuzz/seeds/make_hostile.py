#!/usr/bin/env python3
"""Writes the hostile seed archives and path seeds of the fuzz corpus.

corpus/restore/*.tar.gz    gzip'd tarballs (the `restore` target reads them as they are)
corpus/restore_tar/*.tar   the same tar streams uncompressed (`restore_tar` gzips its input)
corpus/paths/*             op-byte + path lines for the `paths` target

Member names aim at the names the fuzz jail plants (fuzz/src/lib.rs: out, abs, chain1, up,
d/back, dangling, secret, magic, fifo, ...). Run from anywhere: python3 fuzz/seeds/make_hostile.py
"""
import gzip
import io
import os
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "corpus")


def member(name, kind=tarfile.REGTYPE, data=b"FUZZ\n", linkname="", mode=0o644, pax=None):
    return dict(name=name, kind=kind, data=data, linkname=linkname, mode=mode, pax=pax)


def tar_bytes(members, fmt=tarfile.GNU_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for m in members:
            ti = tarfile.TarInfo(m["name"])
            ti.type = m["kind"]
            ti.mode = m["mode"]
            ti.linkname = m["linkname"]
            if m["pax"]:
                ti.pax_headers = m["pax"]
            if m["kind"] in (tarfile.CHRTYPE, tarfile.BLKTYPE):
                ti.devmajor, ti.devminor = 1, 3
            if m["kind"] == tarfile.REGTYPE:
                ti.size = len(m["data"])
                t.addfile(ti, io.BytesIO(m["data"]))
            else:
                t.addfile(ti)
    raw = buf.getvalue()
    # Drop the record padding after the two end blocks: smaller corpus, same archive.
    end = len(raw.rstrip(b"\0"))
    end = -(-end // 512) * 512
    return raw[:end] + b"\0" * 1024


def raw_name(tar, old, new):
    """Rewrites a header name in place (tarfile refuses nothing, but this keeps odd bytes exact)."""
    i = tar.index(old.ljust(100, b"\0")[:100])
    block = bytearray(tar[i:i + 512])
    block[0:100] = new.ljust(100, b"\0")[:100]
    block[148:156] = b" " * 8
    block[148:155] = b"%06o\0" % sum(block) + b" "
    return tar[:i] + bytes(block) + tar[i + 512:]


CASES = {
    "abs-path": [member("/tmp/kern-fuzz-abs")],
    "dotdot": [member("../evil")],
    "dotdot-inner": [member("a/../../evil")],
    "dotdot-dot": [member("./../x")],
    "through-out-link": [member("out/pwned")],
    "through-abs-link": [member("abs/pwned")],
    "through-chain": [member("chain1/pwned")],
    "through-nested-back": [member("d/back/pwned"), member("d/e/sub/pwned")],
    "through-up": [member("up/outside/pwned")],
    "through-magic": [member("magic/pwned"), member("root/tmp/pwned")],
    "onto-dangling": [member("dangling"), member("reldangling")],
    "onto-file-link": [member("secret"), member("relsecret"), member("d/e/deep")],
    "onto-fifo": [member("fifo"), member("d/fifo")],
    "dir-at-link": [member("out/", tarfile.DIRTYPE, mode=0o755), member("out/x")],
    "symlink-then-write": [member("ln", tarfile.SYMTYPE, linkname="../outside"), member("ln/pwned")],
    "symlink-abs": [member("etc", tarfile.SYMTYPE, linkname="/etc")],
    "hardlink-outside": [member("hard", tarfile.LNKTYPE, linkname="../outside/secret")],
    "hardlink-abs": [member("hard", tarfile.LNKTYPE, linkname="/etc/passwd")],
    "hardlink-inside": [member("f2"), member("hard", tarfile.LNKTYPE, linkname="f2")],
    "chardev": [member("dev", tarfile.CHRTYPE)],
    "blockdev": [member("blk", tarfile.BLKTYPE)],
    "fifo-member": [member("pipe", tarfile.FIFOTYPE)],
    "gnu-longname": [member("l/" + "n" * 300), member("o" * 150 + "/../../" + "p" * 120)],
    "pax-long": [member("q" * 200)],
    "pax-path-override": [member("innocent", pax={"path": "../pax-evil"})],
    "pax-linkpath": [member("pl", tarfile.SYMTYPE, linkname="x", pax={"linkpath": "/" + "y" * 150})],
    "exec-and-dirs": [member("a/", tarfile.DIRTYPE, mode=0o755), member("a/run", mode=0o755),
                      member("a/b/c/d"), member("./", tarfile.DIRTYPE, mode=0o755)],
    "many-small": [member("m/%d" % i, data=b"%d" % i) for i in range(40)],
}

PAX = {"pax-long", "pax-path-override", "pax-linkpath"}


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def main():
    tars = {}
    for name, members in CASES.items():
        tars[name] = tar_bytes(members, tarfile.PAX_FORMAT if name in PAX else tarfile.GNU_FORMAT)
    # Bytes tarfile will not write: a backslash, a non-UTF-8 name, a NUL inside the name field.
    tars["raw-backslash"] = raw_name(tar_bytes([member("bsXXXXXX")]), b"bsXXXXXX", b"a\\..\\..\\x")
    tars["raw-non-utf8"] = raw_name(tar_bytes([member("nuXXXXXX")]), b"nuXXXXXX", b"\xff\xfe/x")
    tars["empty"] = b"\0" * 1024
    tars["truncated"] = tar_bytes([member("t", data=b"x" * 2000)])[:1024]
    for name, raw in tars.items():
        write(os.path.join(CORPUS, "restore_tar", name + ".tar"), raw)
        write(os.path.join(CORPUS, "restore", name + ".tar.gz"), gzip.compress(raw, 9, mtime=0))
    # gzip-only seeds: a bomb past the fuzzers' 1 MiB ceiling, a corrupt and a concatenated stream.
    bomb = tar_bytes([member("zeros", data=b"\0" * (2 << 20))])
    write(os.path.join(CORPUS, "restore", "bomb-2mib.tar.gz"), gzip.compress(bomb, 9, mtime=0))
    good = gzip.compress(tars["exec-and-dirs"], 9, mtime=0)
    write(os.path.join(CORPUS, "restore", "corrupt-crc.tar.gz"), good[:-8] + b"\0" * 8)
    write(os.path.join(CORPUS, "restore", "multi-member.tar.gz"),
          gzip.compress(tars["dotdot"][:512], mtime=0) + gzip.compress(tars["dotdot"][512:], mtime=0))

    paths = {
        "dotdot": b"r../x\nw../x",
        "inner-dotdot": b"wa/../../b\nra/../../outside/secret",
        "link-dir": b"wout/x\nrout/secret\noout\ncout/new",
        "abs-link": b"wabs/x\nrabs/secret\ncabs/sub",
        "root-link": b"rroot/etc/passwd\nwroot/tmp/kern-fuzz-x\noroot/tmp",
        "absolute": b"r/etc/passwd\nw/etc/kern-fuzz\no/",
        "slashes-dots": b"wa//b/./c\nra//b/./c\nma/b/c\nc./a/./b/",
        "chain": b"wchain1/x\nrchain1/secret\nochain1",
        "nested-back": b"wd/back/x\nrd/back/secret\nod/e/up3\ncd/e/up3/outside\nrd/e/sub/deep\nrd/e/deep",
        "leaf-links": b"rsecret\nwsecret\nrrelsecret\nwdangling\nwreldangling",
        "up-dot-loop": b"wup/outside/x\nodot\nwdot/x\nrloop/x\nwloop",
        "magic": b"rmagic/x\nwmagic/x\nomagic",
        "fifo": b"rfifo\nwfifo\nmd/fifo\nod/fifo",
        "legit": b"wnew/deep/file.txt\nrnew/deep/file.txt\nmf\nrd/x\nod/e\ncq/r/s",
        "nul-and-empty": b"ra\0b\nw\nr.\nw..\no..\nc.",
        "unicode": "wd\u00e9j\u00e0/\u2603\nr\u202e/x".encode(),
        "snapshot-walk": b"s\nwd/e/new\ns",
    }
    for name, data in paths.items():
        write(os.path.join(CORPUS, "paths", name), data)


if __name__ == "__main__":
    main()
