import HammockConfig
import HammockCore
import Logging

/// Makes one loader per kind that the configuration uses.
struct LoaderFactory: Sendable {
    let resolver: PluginResolver
    let loaded: LoadedConfiguration
    let logger: Logger

    func makeLoaders(for configuration: Configuration, inbox: EngineInbox) async -> [String: any SourceLoader] {
        var loaders: [String: any SourceLoader] = [:]
        for kind in configuration.kinds {
            if kind == "fake" {
                loaders[kind] = FakeLoader(inbox: inbox)
            }
        }
        return loaders
    }
}
