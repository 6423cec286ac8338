import HammockJSON
import HammockPluginKit
import HammockYAML
import Testing

/// YAML content as JSON: what JSON cannot carry is an error at its place, never a changed value.
@Suite struct YAMLContentTests {
    private func converted(_ text: String) throws -> Result<JSONValue, YAMLError> {
        guard let node = try YAML.parse(text) else { return .success(.null) }
        return yamlToJSON(node)
    }

    private func failure(_ text: String) throws -> YAMLError? {
        guard case .failure(let error) = try converted(text) else { return nil }
        return error
    }

    @Test func scalarsKeepTheirTypeAndMappingsTheirOrder() throws {
        let content = try converted("b: 1\na: [true, 1.5, ~, text, '2']\n").get()
        #expect(content == ["b": 1, "a": [true, 1.5, nil, "text", "2"]])
        #expect(content.objectValue?.keys.map { $0 } == ["b", "a"])
    }

    @Test func aNumberJSONHasNoIsAnErrorAtItsLine() throws {
        let error = try #require(try failure("ok: 1\nbad: .nan\n"), "NaN became a value")
        #expect(error.message == ".nan has no JSON number")
        #expect(error.mark.line == 2)
    }

    @Test func aKeyThatIsNoStringIsAnError() throws {
        let error = try #require(try failure("? [a, b]\n: 1\n"), "a list key became a value")
        #expect(error.message == "a key is a list; JSON keys are strings")
        #expect(error.mark.line == 1)
    }
}
