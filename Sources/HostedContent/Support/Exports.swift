// The platform layer's types (`HCPackError`, `DirectoryHandle`, `FileSystem`, `EntryKind`, ...) were declared in
// this module before FileSystemIO existed; re-exported so that code using HostedContent's API builds unchanged.
@_exported import FileSystemIO
