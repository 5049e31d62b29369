/// When an app installs a catalog's product, as Apple's Managed Background Assets do for asset packs
/// (docs/fetch.md): `hcpack catalog --policy ID=POLICY`, read by `hcpack fetch`.
public enum DownloadPolicy: String, Sendable, Equatable, CaseIterable {
    /// Installed with every install, before the app may use any content (fetch installs these first).
    case essential
    /// Installed with every install, but not blocking.
    case prefetch
    /// Installed only when asked for (`fetch --product ID`), then kept up to date. The default.
    case onDemand
}
