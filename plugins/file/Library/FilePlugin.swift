import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockPluginKit
import HammockSystem

/// The `file` kind. A load reads the file now; unless `watch: false`, the plugin also pushes the file's
/// content whenever it changes (see `FileWatcher` for how changes are noticed).
public enum FilePlugin {
    /// The plugin, as its `main.swift` runs it, with a watcher of its own that logs as a plugin does.
    public static var plugin: PluginDescription { plugin(watcher: FileWatcher(log: pluginLog)) }

    /// The plugin, its sources watching their files through `watcher` (a test's own, to run the plugin in
    /// its process beside others).
    public static func plugin(watcher: FileWatcher) -> PluginDescription {
        PluginDescription(kinds: kinds, version: version, optionsSchema: optionsSchema) { setup throws(OptionProblems) in
            try makeSource(setup, watcher: watcher)
        }
    }

    public static let kinds = ["file"]
    /// Its options, described for `hammock schema`.
    public static let optionsSchema: [String: JSONValue] = ["file": FileOptions.schema]
    public static let version = "0.1.0"

    /// A relative `path` is relative to the directory hammock started the plugin in, `~` is `$HOME`.
    static func makeSource(_ setup: SourceSetup, watcher: FileWatcher) throws(OptionProblems) -> any PluginSource {
        let options = try FileOptions(
            setup.options, home: ProcessInfo.processInfo.environment["HOME"],
            workingDirectory: FileManager.default.currentDirectoryPath)
        return FileSource(options: options, push: setup.push, watcher: watcher)
    }
}
