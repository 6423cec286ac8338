import HammockConfig
import HammockCore
import HammockPluginHost

/// The configuration file, read the same way at start (`hammock run`, `hammock check`) and at every reload:
/// which kinds are available is the built-in ones and what `PluginResolver` finds, and a missing one says
/// where it looked.
public struct ConfigurationSource: Sendable {
    public let file: String

    public init(file: String) { self.file = file }

    public func read() -> Result<LoadedConfiguration, ConfigurationError> {
        let searching = PluginResolver()
        let loader = ConfigurationLoader(
            // The reader asks with the YAML's text.
            kindIsAvailable: { BuiltInPlugins.kinds.contains(Kind($0)) || searching.command(for: Kind($0)) != nil },
            pluginSearchDescription: { searching.searchDescription(for: Kind($0)) })
        return loader.load(file: file)
    }
}
