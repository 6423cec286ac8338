/// The keys the configuration reader accepts, in one place for the reader (`ConfigurationLoader`) and for
/// `ConfigurationSchema`, so that a key added to the file format is added to the editors' schema too (a
/// test checks that the schema describes exactly these).
public enum ConfigurationKeys {
    public static let topLevel = ["version", "defaults", "sources", "views", "plugins", "bases", "include", "limits"]
    /// What an included file may hold: declarations, each with its own id. `defaults:`, `plugins:` and
    /// `limits:` apply to every source in every file, so they stand in one place, the main file, where a reader looks for them.
    public static let includedFile = ["sources", "views", "bases", "include"]
    public static let view = ["sources", "ready", "display", "render", "on-click"]
}
