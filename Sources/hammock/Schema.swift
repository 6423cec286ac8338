import ArgumentParser
import FoundationEssentials
import Glibc
import HammockConfig
import HammockCore
import HammockEngine
import HammockJSON

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
        var configured: [String: PluginDefinition] = [:]
        if let config {
            switch ConfigurationSource(file: config).read() {
            case .success(let loaded):
                configured = loaded.configuration.plugins
            case .failure(let error):
                // A file with mistakes still says which plugins it uses; the schema is what finds the mistakes.
                guard let partial = error.partial else {
                    let secrets = Secrets(error.secrets)
                    writeAll(secrets.redactor.redact(error.description + "\n"), to: STDERR_FILENO)
                    throw ExitCode(2)
                }
                configured = partial.configuration.plugins
            }
        }
        let resolver = PluginResolver(configured: configured)
        var kinds = BuiltInPlugins.kinds.sorted().map { ConfigurationSchema.Kind(name: $0, options: BuiltInPlugins.optionsSchema[$0]) }
        var problems: [String] = []
        for kind in Set(Self.shippedKinds + configured.keys).subtracting(BuiltInPlugins.kinds).sorted() {
            guard let command = resolver.command(for: kind) else {
                // Not an error: this hammock was installed without that plugin.
                writeAll(
                    "hammock schema: no plugin for kind \"\(kind)\" (looked for \(resolver.searchDescription(for: kind))); its options are not described\n",
                    to: STDERR_FILENO)
                continue
            }
            switch await PluginHello.read(command: command) {
            case .success(let hello):
                guard hello.kinds.contains(kind) else {
                    problems.append("the plugin of kind \"\(kind)\" (\(command.joined(separator: " "))) serves \(hello.kinds.joined(separator: ", ")), not \(kind)")
                    continue
                }
                let options = hello.optionsSchema[kind]
                if let options {
                    let schemaProblems = JSONSchemaCheck.problems(in: options)
                    if !schemaProblems.isEmpty {
                        let list = schemaProblems.map { "\($0.pointer.tokens.isEmpty ? "" : "at \($0.pointer): ")\($0.message)" }
                        problems.append(
                            "the options schema of kind \"\(kind)\" is not a well-formed JSON Schema (\(list.joined(separator: "; "))); run `hammock plugin check -- \(command.joined(separator: " "))`")
                        continue
                    }
                }
                kinds.append(ConfigurationSchema.Kind(name: kind, options: options))
            case .failure(let error):
                problems.append("the plugin of kind \"\(kind)\" did not say hello: \(error)")
            }
        }
        guard problems.isEmpty else {
            for problem in problems { writeAll("hammock schema: \(problem)\n", to: STDERR_FILENO) }
            throw ExitCode(1)
        }
        print(ConfigurationSchema.schema(kinds: kinds).prettyJSONString)
    }
}
