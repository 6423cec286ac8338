import HammockCore
import HammockJSON

/// Everything a plugin is, in one value: what its hello says (`kinds`, `version`, `templates`,
/// `queuesLoads`, `optionsSchema`) and what serves it (`makeSource`, `onShutdown`).
///
/// Each plugin library declares one (`FilePlugin.plugin`, ...), and that one value is what its
/// `main.swift` runs as a process (`Plugin.run(_:)`) and what hammock serves in its own process for a
/// built-in kind (`Plugin.serve(_:input:writeLine:)`), so a plugin is described once whichever way it runs.
public struct PluginDescription: Sendable {
    public var kinds: [String]
    public var version: String
    /// Per kind, which options may hold no `{{ }}` template and which are URLs whose template values the
    /// engine percent-encodes (see `TemplateRules`); a kind left out has no such rules.
    public var templates: [String: TemplateRules]
    /// The sources may hold a load back before working on it, and call `request.started()` when its work
    /// begins; the engine then counts each load's timeout from that call, not from the send.
    public var queuesLoads: Bool
    /// Per kind, a JSON Schema of its options (built with `JSONSchema.object(...)`), which `hammock schema`
    /// puts into the configuration's schema for editors.
    public var optionsSchema: [String: JSONValue]
    /// Runs once every source has stopped, just before the plugin ends: the place to close what the
    /// sources share (an HTTP client, a connection pool).
    public var onShutdown: @Sendable () async -> Void
    /// Makes the source of each `configure`, or says what is wrong with its options.
    public var makeSource: @Sendable (SourceSetup) async throws(OptionProblems) -> any PluginSource

    public init(
        kinds: [String], version: String, templates: [String: TemplateRules] = [:], queuesLoads: Bool = false,
        optionsSchema: [String: JSONValue] = [:], onShutdown: @escaping @Sendable () async -> Void = {},
        makeSource: @escaping @Sendable (SourceSetup) async throws(OptionProblems) -> any PluginSource
    ) {
        self.kinds = kinds
        self.version = version
        self.templates = templates
        self.queuesLoads = queuesLoads
        self.optionsSchema = optionsSchema
        self.onShutdown = onShutdown
        self.makeSource = makeSource
    }
}
