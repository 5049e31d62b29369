/// Hostile archives, each made by a Python snippet so the bytes are exact. Shared by the verify and install
/// suites: whatever verify refuses, install must refuse too, touching nothing.
public struct HostileArchive: CustomStringConvertible, Sendable {
    public let name: String
    /// File name of the archive the script writes (in the current folder).
    public let file: String
    /// Python code; `plist` (bytes of a valid ContentInfo.plist listing `a.json`) is predefined.
    public let script: String
    /// Rules any of which verify may report for it.
    public let rules: Set<String>

    public var description: String { name }

    public init(_ name: String, file: String = "bad.tar", rules: Set<String>, _ script: String) {
        self.name = name
        self.file = file
        self.script = script
        self.rules = rules
    }

    /// The complete Python program.
    public var program: String {
        """
        import io, os, tarfile, zipfile, struct, zlib, gzip
        plist = b'''<?xml version="1.0" encoding="UTF-8"?>
        <plist version="1.0"><dict><key>IAPProductIdentifier</key><string>com.example.hostile</string>
        <key>ContentVersion</key><string>1.0</string><key>Files</key><array><string>a.json</string></array></dict></plist>
        '''
        def tar_add(t, name, data=b'x', **kw):
            i = tarfile.TarInfo(name)
            i.size = len(data) if kw.get('type', tarfile.REGTYPE) == tarfile.REGTYPE else 0
            for k, v in kw.items(): setattr(i, k, v)
            t.addfile(i, io.BytesIO(data) if i.type == tarfile.REGTYPE else None)
        def base_tar(name='bad.tar', mode='w'):
            t = tarfile.open(name, mode, format=tarfile.PAX_FORMAT)
            tar_add(t, 'ContentInfo.plist', plist)
            tar_add(t, 'Contents/a.json', b'{}')
            return t
        def base_zip(name='bad.zip'):
            z = zipfile.ZipFile(name, 'w')
            z.writestr('ContentInfo.plist', plist)
            z.writestr('Contents/a.json', b'{}')
            return z
        \(script)
        """
    }
}

/// The catalogue: traversal, links, special files, duplicates, twins, bombs, damage, formats.
public let hostileArchives: [HostileArchive] = [
    HostileArchive("dot-dot name", rules: ["archive.unsafe-path"], "t = base_tar(); tar_add(t, '../x'); t.close()"),
    HostileArchive("nested dot-dot", rules: ["archive.unsafe-path"], "t = base_tar(); tar_add(t, 'Contents/a/../../../x'); t.close()"),
    HostileArchive("absolute name", rules: ["archive.unsafe-path"], "t = base_tar(); tar_add(t, '/tmp/hcpack-abs'); t.close()"),
    HostileArchive("double-slash name", rules: ["archive.unsafe-path"], "t = base_tar(); tar_add(t, '//x'); t.close()"),
    HostileArchive("backslash dot-dot", file: "bad.zip", rules: ["archive.unsafe-path"], "z = base_zip(); z.writestr('..\\\\x', b'x'); z.close()"),
    HostileArchive("drive letter", file: "bad.zip", rules: ["archive.unsafe-path"], "z = base_zip(); z.writestr('C:x', b'x'); z.close()"),
    HostileArchive("absolute symlink", rules: ["content.symlink-escapes"], "t = base_tar(); tar_add(t, 'Contents/l', type=tarfile.SYMTYPE, linkname='/etc/passwd'); t.close()"),
    HostileArchive("escaping symlink", rules: ["content.symlink-escapes"], "t = base_tar(); tar_add(t, 'Contents/l', type=tarfile.SYMTYPE, linkname='../../x'); t.close()"),
    HostileArchive("symlink to parent, then a file through it", rules: ["content.symlink-escapes", "archive.unsafe-path", "archive.duplicate-entry"],
        "t = base_tar(); tar_add(t, 'Contents/d', type=tarfile.SYMTYPE, linkname='..'); tar_add(t, 'Contents/d/x', b'through'); t.close()"),
    HostileArchive("symlink to itself", rules: ["content.symlink", "files.not-regular"], "t = base_tar(); tar_add(t, 'Contents/s', type=tarfile.SYMTYPE, linkname='s'); t.close()"),
    HostileArchive("listed file is a symlink", rules: ["files.not-regular"],
        "t = tarfile.open('bad.tar', 'w', format=tarfile.PAX_FORMAT); tar_add(t, 'ContentInfo.plist', plist); tar_add(t, 'Contents/b.json', b'{}'); tar_add(t, 'Contents/a.json', type=tarfile.SYMTYPE, linkname='b.json'); t.close()"),
    HostileArchive("escaping hard link", rules: ["content.hardlink-escapes"], "t = base_tar(); tar_add(t, 'Contents/h', type=tarfile.LNKTYPE, linkname='/etc/passwd'); t.close()"),
    HostileArchive("hard link inside", rules: ["content.hardlink"], "t = base_tar(); tar_add(t, 'Contents/h', type=tarfile.LNKTYPE, linkname='Contents/a.json'); t.close()"),
    HostileArchive("fifo", rules: ["content.special-file"], "t = base_tar(); tar_add(t, 'Contents/f', type=tarfile.FIFOTYPE); t.close()"),
    HostileArchive("character device", rules: ["content.special-file"], "t = base_tar(); tar_add(t, 'Contents/c', type=tarfile.CHRTYPE, devmajor=1, devminor=3); t.close()"),
    HostileArchive("block device", rules: ["content.special-file"], "t = base_tar(); tar_add(t, 'Contents/b', type=tarfile.BLKTYPE, devmajor=8, devminor=0); t.close()"),
    HostileArchive("setuid file", rules: ["content.unsafe-permissions"], "t = base_tar(); tar_add(t, 'Contents/s.json', b'{}', mode=0o4755); t.close()"),
    HostileArchive("setgid file", rules: ["content.unsafe-permissions"], "t = base_tar(); tar_add(t, 'Contents/g.json', b'{}', mode=0o2755); t.close()"),
    HostileArchive("backslash dot-dot in a tar", rules: ["archive.unsafe-path"], "t = base_tar(); tar_add(t, 'Contents/..\\\\x', b'x'); t.close()"),
    HostileArchive("drive letter in a tar", rules: ["archive.unsafe-path"], "t = base_tar(); tar_add(t, 'C:x', b'x'); t.close()"),
    HostileArchive("name component over 255 bytes", rules: ["content.long-path"], "t = base_tar(); tar_add(t, 'Contents/' + 'n' * 300); t.close()"),
    HostileArchive("path over 4096 bytes", rules: ["content.long-path"], "t = base_tar(); tar_add(t, 'Contents/' + '/'.join(['d' * 200] * 25) + '/x'); t.close()"),
    HostileArchive("folders 600 deep", rules: ["content.long-path"], "t = base_tar(); tar_add(t, 'Contents/' + 'd/' * 600 + 'x'); t.close()"),
    // Issue 18: one pax path of 444,749 bytes took 69 s of CPU while every ancestor prefix was hashed whole.
    HostileArchive("pax path of 444,749 bytes", rules: ["content.long-path"], "t = base_tar(); tar_add(t, './' + 'a/' * 222373 + 'a'); t.close()"),
    HostileArchive("pax path of 444 kB under a symlinked folder", rules: ["content.long-path", "archive.unsafe-path"],
        "t = base_tar(); tar_add(t, 'Contents/l', type=tarfile.SYMTYPE, linkname='x'); tar_add(t, 'Contents/l/' + 'a/' * 222000 + 'a'); t.close()"),
    // GNU tar writes holes as a sparse map: a few KB of archive that unpack to gigabytes of zeros.
    HostileArchive("sparse entry of 10 GiB", rules: ["archive.limit-exceeded"],
        "import subprocess; os.makedirs('src/Contents'); open('src/ContentInfo.plist','wb').write(plist); open('src/Contents/a.json','wb').write(b'{}'); subprocess.run(['truncate','-s','10G','src/Contents/hole.bin'], check=True); subprocess.run(['tar','--sparse','--format=gnu','-cf','../bad.tar','ContentInfo.plist','Contents'], cwd='src', check=True)"),
    HostileArchive("sparse entry of 4 GiB (ratio)", rules: ["archive.compression-ratio"],
        "import subprocess; os.makedirs('src/Contents'); open('src/ContentInfo.plist','wb').write(plist); open('src/Contents/a.json','wb').write(b'{}'); subprocess.run(['truncate','-s','4G','src/Contents/hole.bin'], check=True); subprocess.run(['tar','--sparse','--format=pax','-cf','../bad.tar','ContentInfo.plist','Contents'], cwd='src', check=True)"),
    HostileArchive("duplicate names", rules: ["archive.duplicate-entry"], "t = base_tar(); tar_add(t, 'Contents/a.json', b'{\"second\": 1}'); t.close()"),
    HostileArchive("file then folder of the same name", rules: ["archive.duplicate-entry"], "t = base_tar(); tar_add(t, 'Contents/a.json/inner', b'x'); tar_add(t, 'Contents/a.json', type=tarfile.DIRTYPE); t.close()"),
    HostileArchive("folder then file of the same name", rules: ["archive.duplicate-entry"], "t = base_tar(); tar_add(t, 'Contents/d/x', b'1'); tar_add(t, 'Contents/d', b'2'); t.close()"),
    HostileArchive("file then a file inside it, no folder entry", file: "bad.zip", rules: ["archive.duplicate-entry"], "z = base_zip(); z.writestr('Contents/a.json/inner', b'x'); z.close()"),
    HostileArchive("case twins", rules: ["content.case-collision"], "t = base_tar(); tar_add(t, 'Contents/A.json', b'{}'); t.close()"),
    // libarchive turns NFD names into NFC as it reads, so the twins arrive as one name twice.
    HostileArchive("NFC/NFD twins", rules: ["content.normalization-collision", "archive.duplicate-entry"], "t = base_tar(); tar_add(t, 'Contents/caf\\u00e9', b'1'); tar_add(t, 'Contents/cafe\\u0301', b'2'); t.close()"),
    HostileArchive("plist is a symlink", rules: ["structure.plist-not-file"],
        "t = tarfile.open('bad.tar', 'w'); tar_add(t, 'ContentInfo.plist', type=tarfile.SYMTYPE, linkname='/etc/passwd'); tar_add(t, 'Contents/a.json', b'{}'); t.close()"),
    HostileArchive("plist is a fifo", rules: ["structure.plist-not-file"],
        "t = tarfile.open('bad.tar', 'w'); tar_add(t, 'ContentInfo.plist', type=tarfile.FIFOTYPE); tar_add(t, 'Contents/a.json', b'{}'); t.close()"),
    HostileArchive("plist is a folder", rules: ["structure.plist-not-file"],
        "t = tarfile.open('bad.tar', 'w'); tar_add(t, 'ContentInfo.plist', type=tarfile.DIRTYPE); tar_add(t, 'Contents/a.json', b'{}'); t.close()"),
    HostileArchive("huge plist", file: "bad.tar", rules: ["plist.parse"],
        "t = tarfile.open('bad.tar', 'w'); tar_add(t, 'ContentInfo.plist', plist[:-10] + b' ' * (65 << 20) + plist[-10:]); tar_add(t, 'Contents/a.json', b'{}'); t.close()"),
    HostileArchive("zip bomb", file: "bad.zip", rules: ["archive.compression-ratio"],
        "z = zipfile.ZipFile('bad.zip', 'w', zipfile.ZIP_DEFLATED); z.writestr('ContentInfo.plist', plist); z.writestr('Contents/a.json', b'\\0' * (300 << 20)); z.close()"),
    HostileArchive("overlapping zip entries", file: "bad.zip", rules: ["archive.corrupt", "archive.duplicate-entry", "archive.compression-ratio", "files.unlisted"],
        """
        z = base_zip(); z.close()
        data = bytearray(open('bad.zip','rb').read())
        # Point a third central-directory record at the first local header (Fifield's overlap).
        eocd = data.rfind(b'PK\\x05\\x06'); cd_off = struct.unpack('<I', data[eocd+16:eocd+20])[0]
        first = data[cd_off:cd_off+46+struct.unpack('<H', data[cd_off+28:cd_off+30])[0]]
        copy = bytearray(first); name = b'Contents/b.json'; copy[28:30] = struct.pack('<H', len(name)); copy = copy[:46] + name
        cd = data[cd_off:eocd] + copy
        count = struct.unpack('<H', data[eocd+10:eocd+12])[0] + 1
        eocd_rec = bytearray(data[eocd:eocd+22]); eocd_rec[8:10] = struct.pack('<H', count); eocd_rec[10:12] = struct.pack('<H', count)
        eocd_rec[12:16] = struct.pack('<I', len(cd)); eocd_rec[16:20] = struct.pack('<I', cd_off)
        open('bad.zip','wb').write(data[:cd_off] + cd + eocd_rec)
        """),
    HostileArchive("size that lies", file: "bad.zip", rules: ["archive.corrupt"],
        """
        z = zipfile.ZipFile('bad.zip', 'w', zipfile.ZIP_DEFLATED); z.writestr('ContentInfo.plist', plist); z.writestr('Contents/a.json', b'{' + b' ' * 5000 + b'}'); z.close()
        data = bytearray(open('bad.zip','rb').read())
        eocd = data.rfind(b'PK\\x05\\x06'); cd_off = struct.unpack('<I', data[eocd+16:eocd+20])[0]
        second = data.find(b'PK\\x01\\x02', cd_off + 4)
        data[second+24:second+28] = struct.pack('<I', 10)  # uncompressed size: 10
        open('bad.zip','wb').write(data)
        """),
    HostileArchive("CRC mismatch", file: "bad.zip", rules: ["archive.corrupt"],
        """
        z = zipfile.ZipFile('bad.zip', 'w', zipfile.ZIP_STORED); z.writestr('ContentInfo.plist', plist); z.writestr('Contents/a.json', b'{"payload": "' + b'p' * 400 + b'"}'); z.close()
        data = bytearray(open('bad.zip','rb').read()); at = data.find(b'pppp'); data[at] ^= 1
        open('bad.zip','wb').write(data)
        """),
    HostileArchive("truncated tar.gz", file: "bad.tar.gz", rules: ["archive.corrupt"],
        "t = base_tar('full.tar.gz', 'w:gz'); tar_add(t, 'Contents/b.bin', os.urandom(100000)); t.close(); d = open('full.tar.gz','rb').read(); open('bad.tar.gz','wb').write(d[:len(d)//2])"),
    HostileArchive("zip without central directory", file: "bad.zip", rules: ["archive.corrupt", "archive.unsupported-format"],
        "z = base_zip(); z.close(); d = open('bad.zip','rb').read(); open('bad.zip','wb').write(d[:d.find(b'PK\\x01\\x02')])"),
    HostileArchive("stacked filters", file: "bad.tar.gz.gz", rules: ["archive.nested-compression"],
        "t = base_tar('inner.tar.gz', 'w:gz'); t.close(); open('bad.tar.gz.gz','wb').write(gzip.compress(open('inner.tar.gz','rb').read()))"),
    // Issue 18: libarchive 3.6.2's gzip filter, stacked on a gzip by bidding, never finished reading the inner
    // header's file name (memory grew by 45 MB/s); bsdtar hangs on it too.
    HostileArchive("gzip inside a gzip whose file-name field never ends", file: "bad.gz", rules: ["archive.nested-compression"],
        "open('bad.gz','wb').write(gzip.compress(b'\\x1f\\x8b\\x08\\x08' + bytes(6) + b'a' * (64 << 20), 9))"),
    HostileArchive("bzip2 inside a zstd", file: "bad.tar.bz2.zst", rules: ["archive.nested-compression"],
        "import subprocess; t = base_tar('inner.tar.bz2', 'w:bz2'); t.close(); subprocess.run(['zstd', '-q', 'inner.tar.bz2', '-o', 'bad.tar.bz2.zst'], check=True)"),
    // A bzip2 block of incompressible data is larger than the first 64 KiB: the check reads further.
    HostileArchive("gzip inside a bzip2 whose first block is 900 kB", file: "bad.tar.gz.bz2", rules: ["archive.nested-compression"],
        "import bz2; t = base_tar('inner.tar.gz', 'w:gz'); tar_add(t, 'Contents/noise.bin', os.urandom(1 << 20)); t.close(); open('bad.tar.gz.bz2','wb').write(bz2.compress(open('inner.tar.gz','rb').read()))"),
    // Issue 18: libarchive 3.6.2's xar reader spins forever on hard links that form a loop; xar is not read at all.
    HostileArchive("xar with a hard-link loop", file: "bad.xar", rules: ["archive.unsupported-format"],
        """
        toc = b'<?xml version="1.0"?><xar><toc><file id="1"><name>a</name><type>hardlink</type><link>2</link></file>'
        toc += b'<file id="2"><name>b</name><type>hardlink</type><link>1</link></file></toc></xar>'
        packed = zlib.compress(toc)
        open('bad.xar','wb').write(b'xar!' + struct.pack('>HHQQI', 28, 1, len(packed), len(toc), 1) + packed)
        """),
    HostileArchive("any xar", file: "bad.xar", rules: ["archive.unsupported-format"],
        "import subprocess; os.makedirs('src/Contents'); open('src/ContentInfo.plist','wb').write(plist); open('src/Contents/a.json','wb').write(b'{}'); subprocess.run(['bsdtar','--format','xar','-cf','../bad.xar','.'], cwd='src', check=True)"),
    HostileArchive("garbage after a zip", file: "bad.zip", rules: ["archive.corrupt", "archive.unsupported-format"],
        "z = base_zip(); z.close(); open('bad.zip','ab').write(os.urandom(3000))"),
    HostileArchive("random bytes", file: "bad.bin", rules: ["archive.unsupported-format"], "import random; r = random.Random(7); open('bad.bin','wb').write(bytes(r.randrange(256) for _ in range(5000)))"),
    HostileArchive("7z signature", file: "bad.7z", rules: ["archive.unsupported-format"], "open('bad.7z','wb').write(b\"7z\\xbc\\xaf\\x27\\x1c\" + bytes(200))"),
    HostileArchive("RAR signature", file: "bad.rar", rules: ["archive.unsupported-format"], "open('bad.rar','wb').write(b'Rar!\\x1a\\x07\\x01\\x00' + bytes(200))"),
    HostileArchive("encrypted zip entry", file: "bad.zip", rules: ["archive.encrypted"],
        "import subprocess; os.makedirs('src/Contents', exist_ok=True); open('src/ContentInfo.plist','wb').write(plist); open('src/Contents/a.json','wb').write(b'{}'); subprocess.run(['zip','-qr','-P','pw','../bad.zip','.'], cwd='src', check=True)"),
    HostileArchive("XXE in plist", rules: ["plist.parse"],
        """
        evil = b'<?xml version="1.0"?><!DOCTYPE plist [<!ENTITY x SYSTEM "file:///etc/passwd">]><plist version="1.0"><dict><key>IAPProductIdentifier</key><string>&x;</string></dict></plist>'
        t = tarfile.open('bad.tar', 'w'); tar_add(t, 'ContentInfo.plist', evil); tar_add(t, 'Contents/a.json', b'{}'); t.close()
        """),
    HostileArchive("billion laughs", rules: ["plist.parse"],
        """
        ents = '<!ENTITY a0 "lol">' + ''.join('<!ENTITY a%d "%s">' % (i, ('&a%d;' % (i-1)) * 10) for i in range(1, 10))
        evil = ('<?xml version="1.0"?><!DOCTYPE plist [' + ents + ']><plist version="1.0"><dict><key>IAPProductIdentifier</key><string>&a9;</string></dict></plist>').encode()
        t = tarfile.open('bad.tar', 'w'); tar_add(t, 'ContentInfo.plist', evil); tar_add(t, 'Contents/a.json', b'{}'); t.close()
        """),
    HostileArchive("deep XML", rules: ["plist.parse"],
        """
        evil = b'<?xml version="1.0"?><plist version="1.0">' + b'<array>' * 10000 + b'</array>' * 10000 + b'</plist>'
        t = tarfile.open('bad.tar', 'w'); tar_add(t, 'ContentInfo.plist', evil); tar_add(t, 'Contents/a.json', b'{}'); t.close()
        """),
    HostileArchive("binary plist cycle", rules: ["plist.parse"],
        """
        # bplist00: object 0 is an array holding itself.
        body = b'bplist00' + b'\\xa1\\x00'
        offsets = bytes([8])
        trailer = bytes(6) + bytes([1, 1]) + struct.pack('>QQQ', 1, 0, len(body))
        evil = body + offsets + trailer
        t = tarfile.open('bad.tar', 'w'); tar_add(t, 'ContentInfo.plist', evil); tar_add(t, 'Contents/a.json', b'{}'); t.close()
        """),
    HostileArchive("too many entries", file: "bad.tar.gz", rules: ["archive.limit-exceeded"],
        "t = base_tar('bad.tar.gz', 'w:gz'); [tar_add(t, 'Contents/many/%d' % i, b'') for i in range(1200)]; t.close()"),
]
