'use strict'
// E2B's enums as frozen objects: the values are the strings E2B's API uses.

/** The type of a filesystem entry (`EntryInfo.type`). */
const FileType = Object.freeze({ FILE: 'file', DIR: 'dir', SYMLINK: 'symlink' })

/** What happened to an entry in a watched directory (`FilesystemEvent.type`). */
const FilesystemEventType = Object.freeze({
  CHMOD: 'chmod',
  CREATE: 'create',
  REMOVE: 'remove',
  RENAME: 'rename',
  WRITE: 'write',
})

module.exports = { FileType, FilesystemEventType }
