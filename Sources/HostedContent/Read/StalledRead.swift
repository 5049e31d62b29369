import ArchiveIO

/// How a read that stalls inside libarchive ends the process (`ArchiveWatchdog`, docs/SECURITY.md): the
/// message names the `archive.stalled` rule, and the process exits with status 1.
public enum StalledRead {
    /// Routes the watchdog's stop through `report`, which gets the message (rule first) and should write it
    /// at once; the process ends with exit status 1 when it returns.
    public static func onStop(_ report: @escaping @Sendable (String) -> Void) {
        ArchiveWatchdog.setStopHandler { error in report("[\(Rule.stalled.rawValue)] \(error.message)") }
    }

    /// Sets the default of `ArchiveLimits.stallSeconds` for the readers this process makes from now on.
    public static func setDefaultStallSeconds(_ seconds: Int) {
        ArchiveWatchdog.setDefaultStallSeconds(seconds)
    }
}
