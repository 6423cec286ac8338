import HammockConfig
import HammockCore
import HammockJSON

/// The loader the tests use: `fake` (built in), `shell`, `file` and `rest` have plugins.
func loader(_ environment: [String: String] = [:]) -> ConfigurationLoader {
    ConfigurationLoader(environment: environment, kindIsAvailable: { ["fake", "shell", "file", "rest"].contains($0) })
}

/// Every diagnostic as `line:column: message`, in the order the loader reports them; empty when the text loads.
func problems(_ text: String, environment: [String: String] = [:]) -> [String] {
    switch loader(environment).parse(text, file: "test.yaml") {
    case .success: []
    case .failure(let error): error.diagnostics.map { "\($0.mark.line):\($0.mark.column): \($0.message)" }
    }
}

struct LoadFailed: Error, CustomStringConvertible {
    var description: String
}

/// Loads text that must be valid.
func load(_ text: String, environment: [String: String] = [:]) throws -> LoadedConfiguration {
    switch loader(environment).parse(text, file: "test.yaml") {
    case .success(let loaded): loaded
    case .failure(let error): throw LoadFailed(description: error.description)
    }
}

extension Configuration {
    func source(_ id: SourceID) -> SourceDefinition? { sources.first { $0.id == id } }
}
