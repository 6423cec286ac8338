import ArgumentParser
import FoundationEssentials
import Glibc
import HammockConfig
import HammockCore
import HammockEngine
import HammockJSON
import HammockPluginHost

/// `hammock schema [CONFIG]`: the configuration's JSON Schema, for editors.
struct Schema: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the JSON Schema (draft 2020-12) of the configuration, each kind's options included.",
        discussion: """
            Describes the built-in kind and the shipped plugins (rest, shell, file) found where hammock looks \
            for plugins, each as its plugin describes its options in its hello (hammock starts each plugin \
            to ask, and ends it). With CONFIG, also the kinds of its `plugins:` section. Point an editor's \
            YAML language server at the output; see README.md, "Editor completion".

              hammock schema > docs/schema/configuration.schema.json
              hammock schema config.yaml > config.schema.json
            """)

    /// The plugins hammock ships, described without a configuration.
    static let shippedKinds = ["file", "rest", "shell"]

    @Argument(help: "A configuration whose `plugins:` section names more kinds to describe.", completion: .file(extensions: ["yaml", "yml"]))
    var config: String?

    func run() async throws {
        var configured: [Kind: PluginDefinition] = [:]
        // A plugin's command may hold a secret (`command: [tool, --token, "${secret:TOKEN}"]`), and every
        // message below may quote the command or what the plugin wrote: all of stderr is redacted.
        var redactor = Redactor.none
        if let config {
            switch ConfigurationSource(file: config).read() {
            case .success(let loaded):
                configured = loaded.configuration.plugins
                redactor = Redactor(secrets: loaded.configuration.secrets)
            case .failure(let error):
                redactor = Redactor(secrets: error.secrets)
                // A file with mistakes still says which plugins it uses; the schema is what finds the mistakes.
                guard let partial = error.partial else {
                    writeAll(redactor.redact(error.description + "\n"), to: STDERR_FILENO)
                    throw ExitCode(2)
                }
                configured = partial.configuration.plugins
            }
        }
        func report(_ text: String) { writeAll(redactor.redact(text + "\n"), to: STDERR_FILENO) }
        let resolver = PluginResolver(configured: configured)
        var kinds = BuiltInPlugins.kinds.sorted().map {
            ConfigurationSchema.Kind(name: $0.rawValue, options: BuiltInPlugins.optionsSchema[$0.rawValue])
        }
        var problems: [String] = []
        for kind in Set(Self.shippedKinds.map { Kind($0) } + configured.keys).subtracting(BuiltInPlugins.kinds).sorted() {
            guard let command = resolver.command(for: kind) else {
                // Not an error: this hammock was installed without that plugin.
                report(
                    "hammock schema: no plugin for kind \"\(kind)\" (looked for \(resolver.searchDescription(for: kind))); its options are not described")
                continue
            }
            switch await PluginHello.read(command: command, redactor: redactor) {
            case .success(let hello):
                // The hello names kinds as the protocol's text.
                guard hello.kinds.contains(kind.rawValue) else {
                    problems.append("the plugin of kind \"\(kind)\" (\(command.joined(separator: " "))) serves \(hello.kinds.joined(separator: ", ")), not \(kind)")
                    continue
                }
                let options = hello.optionsSchema[kind.rawValue]
                if let options {
                    var schemaProblems = JSONSchemaCheck.problems(in: options)
                    // Only a well-formed schema's references can be followed.
                    if schemaProblems.isEmpty { schemaProblems = JSONSchemaReferences.problems(in: options) }
                    if !schemaProblems.isEmpty {
                        let list = schemaProblems.map { "\($0.pointer.tokens.isEmpty ? "" : "at \($0.pointer): ")\($0.message)" }
                        problems.append(
                            "the options schema of kind \"\(kind)\" is not a well-formed JSON Schema (\(list.joined(separator: "; "))); run `hammock plugin check -- \(command.joined(separator: " "))`")
                        continue
                    }
                }
                kinds.append(ConfigurationSchema.Kind(name: kind.rawValue, options: options))
            case .failure(let error):
                problems.append("the plugin of kind \"\(kind)\" did not say hello: \(error)")
            }
        }
        guard problems.isEmpty else {
            for problem in problems { report("hammock schema: \(problem)") }
            throw ExitCode(1)
        }
        print(ConfigurationSchema.schema(kinds: kinds).prettyJSONString)
    }
}
