import HammockCore
import HammockJSON
import HammockPluginKit

/// The `fake` kind, for building and testing consumers without a network: a load answers with `content`
/// after `delay`, or with `error` (`state: error`), or never (`state: loading`).
///
/// Built into hammock: the engine runs it in its own process (`InProcessTransport`), so it has no executable
/// and is available wherever hammock is.
public enum FakePlugin {
    /// The plugin, as its `main.swift` runs it and hammock serves it in process (`BuiltInPlugins`).
    public static let plugin = PluginDescription(
        kinds: kinds, version: version, optionsSchema: optionsSchema, makeSource: makeSource)

    public static let kinds = ["fake"]
    /// Its options, described for `hammock schema`.
    public static let optionsSchema: [String: JSONValue] = ["fake": FakeOptions.schema]
    public static let version = "0.1.0"

    public static func makeSource(_ setup: SourceSetup) throws(OptionProblems) -> any PluginSource {
        FakeSource(options: try FakeOptions(setup.options))
    }
}

struct FakeSource: PluginSource {
    let options: FakeOptions

    func load(_ request: PluginLoadRequest) async -> PluginLoadResult {
        if options.delay > .zero { try? await Task.sleep(for: options.delay) }
        switch options.outcome {
        case .data:
            return .newData(options.content)
        case .error:
            return .error(options.error)
        case .loading:
            // Stays in flight until the engine cancels it (its own cancel, or the source's timeout): one sleep
            // longer than any run, which the cancellation ends. The kit has answered `cancelled` by then and
            // drops whatever comes back.
            try? await Task.sleep(for: .seconds(1 << 30))
            return .error(SourceError(message: "cancelled while loading"))
        }
    }
}
