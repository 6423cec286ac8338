import HammockCore
import HammockJSON
import HammockPluginKit

/// The `shell` kind. Runs a command per load (`mode: poll`) or keeps one running and turns each line it
/// prints into new content (`mode: stream`). Every command runs in a process group of its own, which the
/// plugin ends as a whole on timeout, cancel, remove and shutdown.
public enum ShellPlugin {
    /// The plugin, as its `main.swift` runs it: a command watcher of its own, and as many command slots as
    /// `HAMMOCK_SHELL_CONCURRENCY` says.
    public static var plugin: PluginDescription { plugin(watcher: CommandWatcher(), slots: configuredSlots()) }

    /// The plugin, its sources running commands through `watcher`, at most `slots` polls at once (a test's
    /// own, to run the plugin in its process).
    static func plugin(watcher: CommandWatcher, slots: CommandSlots) -> PluginDescription {
        PluginDescription(
            kinds: kinds, version: version, templates: templates, queuesLoads: queuesLoads, optionsSchema: optionsSchema
        ) { setup throws(OptionProblems) in
            try makeSource(setup, watcher: watcher, slots: slots)
        }
    }

    public static let kinds = ["shell"]
    /// Its options, described for `hammock schema`.
    public static let optionsSchema: [String: JSONValue] = ["shell": ShellOptions.schema]
    /// The plugin holds loads back while `commandSlots` are all taken, and says when each starts.
    public static let queuesLoads = true
    /// How many poll commands run at once (`HAMMOCK_SHELL_CONCURRENCY`, else `CommandSlots.defaultLimit`).
    /// Streams take none: each is one long-lived command per source, which a slot would hold for ever.
    static func configuredSlots() -> CommandSlots {
        let (limit, problem) = CommandSlots.configuredLimit()
        if let problem { pluginLog(problem) }
        return CommandSlots(limit: limit)
    }
    public static let version = "0.1.0"
    /// A value filled into a script's text could change the script, so `script:` holds no template (the
    /// engine says so at the template's line and column); `command: [...]` passes each value as one argument.
    public static let templates = [
        "shell": TemplateRules(refused: [
            JSONPointer(tokens: ["script"]):
                "a template inside `script:` is not allowed (a value could change the script); use `command: [...]` so each value is passed as one argument"
        ])
    ]

    static func makeSource(
        _ setup: SourceSetup, watcher: CommandWatcher, slots: CommandSlots
    ) throws(OptionProblems) -> any PluginSource {
        let options = try ShellOptions(setup.options)
        switch options.mode {
        case .poll: return PollSource(options: options, slots: slots, watcher: watcher)
        case .stream: return StreamSource(options: options, push: setup.push, watcher: watcher)
        }
    }
}
