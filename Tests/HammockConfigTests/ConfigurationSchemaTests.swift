import HammockConfig
import HammockCore
import HammockJSON
import Testing

/// The configuration's JSON Schema, in-process: it describes exactly the keys the reader accepts (the lists
/// are shared, and these tests hold the schema to them), and each described kind's options are applied to
/// its sources. The real validator runs in tests/consumers/schema.
@Suite struct ConfigurationSchemaTests {
    static let weather: JSONValue = [
        "type": "object", "properties": ["city": ["type": "string"]], "required": ["city"], "additionalProperties": false,
    ]
    static let schema = ConfigurationSchema.schema(kinds: [
        .init(name: "weather", options: weather), .init(name: "opaque", options: nil),
    ])

    private func keys(_ value: JSONValue?) -> [String] {
        value?["properties"]?.objectValue.map { Array($0.keys) } ?? []
    }

    @Test func itIsAWellFormedDraft202012Schema() {
        #expect(Self.schema["$schema"] == .string("https://json-schema.org/draft/2020-12/schema"))
        #expect(JSONSchemaCheck.problems(in: Self.schema).isEmpty)
    }

    @Test func theTopLevelIsExactlyTheReadersKeys() {
        #expect(keys(Self.schema) == ConfigurationKeys.topLevel)
        #expect(Self.schema["additionalProperties"] == false)
        #expect(Self.schema["required"] == ["sources"])
    }

    @Test func defaultsTakeTheInheritableCommonKeysOnly() {
        let defaults = Self.schema["properties"]?["defaults"]
        #expect(keys(defaults) == CommonSourceKey.inheritableNames)
        #expect(defaults?["additionalProperties"] == false)
    }

    @Test func aSourceHasTheCommonKeysAndRefusesEveryOther() {
        let source = Self.schema["$defs"]?["source"]
        #expect(keys(source) == CommonSourceKey.names + ["base"])
        #expect(source?["unevaluatedProperties"] == false)
        // A kind of its own, or a base that gives one.
        #expect(source?["anyOf"] == [["required": ["kind"]], ["required": ["base"]]])
    }

    /// A base holds any keys of a source, none required; `bases:` maps names to bases, `include:` takes a file or
    /// a list of them.
    @Test func basesAndIncludes() {
        let base = Self.schema["$defs"]?["base"]
        #expect(keys(base) == CommonSourceKey.names + ["base"])
        #expect(base?["anyOf"] == nil && base?["required"] == nil)
        #expect(base?["unevaluatedProperties"] == false)
        #expect(Self.schema["properties"]?["bases"]?["additionalProperties"] == ["$ref": "#/$defs/base"])
        let include = Self.schema["properties"]?["include"]?["anyOf"]?.arrayValue
        #expect(include?.map { $0["type"] } == ["string", "array"])
    }

    /// `if kind is weather then weather's options (at #/$defs/kind:weather), with the common keys beside
    /// them`; a kind without a
    /// schema takes any options.
    @Test func eachDescribedKindAppliesItsOptionsToItsSources() throws {
        let branches = try #require(Self.schema["$defs"]?["source"]?["allOf"]?.arrayValue)
        #expect(branches.count == 3)
        #expect(branches[0]["if"]?["properties"]?["kind"] == ["const": "weather"])
        // By reference to the one place the kind's options stand.
        #expect(branches[0]["then"] == ["$ref": "#/$defs/kind:weather"])
        let then = try #require(Self.schema["$defs"]?["kind:weather"])
        #expect(keys(then) == ["city"] + CommonSourceKey.names)
        #expect(then["additionalProperties"] == false)
        #expect(then["required"] == ["city"])
        #expect(branches[1]["if"]?["properties"]?["kind"] == ["not": ["enum": ["weather"]]])
        #expect(branches[1]["then"] == ["additionalProperties": true])
        // Without a kind (it comes from a base), the options are `hammock check`'s to judge.
        #expect(branches[2] == ["if": ["not": ["required": ["kind"]]], "then": ["additionalProperties": true]])
        let kind = Self.schema["$defs"]?["source"]?["properties"]?["kind"]?["anyOf"]?.arrayValue?.first
        #expect(kind == ["enum": ["weather", "opaque"]])
    }

    @Test func aViewIsExactlyTheReadersKeys() {
        let view = Self.schema["$defs"]?["view"]
        #expect(keys(view) == ConfigurationKeys.view)
        #expect(view?["additionalProperties"] == false)
        #expect(keys(view?["properties"]?["render"]) == ViewRender.Field.allCases.map(\.rawValue) + ["loading", "error", "idle"])
    }

    /// A duration is a string with a unit; `${NAME}` is accepted too, as the reader fills it in first.
    @Test func theDurationPatternMatchesWhatParseDurationReads() throws {
        let regex = try Regex(JSONSchema.durationPattern)
        for text in ["250ms", "5s", "2m", "1h", "1.5s", "1m30s", " 5s "] {
            #expect(text.wholeMatch(of: regex) != nil, "\(text)")
            #expect((try? parseDuration(text).get()) != nil, "\(text)")
        }
        for text in ["5", "5x", "s", "", "1.5"] {
            #expect(text.wholeMatch(of: regex) == nil, "\(text)")
            #expect((try? parseDuration(text).get()) == nil, "\(text)")
        }
    }
}
