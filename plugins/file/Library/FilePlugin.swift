import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockPluginKit

/// The `file` kind. A load reads the file now; unless `watch: false`, the plugin also pushes the file's
/// content whenever it changes (see `FileWatcher` for how changes are noticed).
public enum FilePlugin {
    /// The plugin, as its `main.swift` runs it.
    public static let plugin = PluginDescription(
        kinds: kinds, version: version, optionsSchema: optionsSchema, makeSource: makeSource)

    public static let kinds = ["file"]
    /// Its options, described for `hammock schema`.
    public static let optionsSchema: [String: JSONValue] = ["file": FileOptions.schema]
    public static let version = "0.1.0"

    /// A relative `path` is relative to the directory hammock started the plugin in, `~` is `$HOME`.
    public static func makeSource(_ setup: SourceSetup) throws(OptionProblems) -> any PluginSource {
        let options = try FileOptions(
            setup.options, home: ProcessInfo.processInfo.environment["HOME"],
            workingDirectory: FileManager.default.currentDirectoryPath)
        return FileSource(options: options, push: setup.push)
    }
}
