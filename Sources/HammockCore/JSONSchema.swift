import HammockJSON

/// Pieces of JSON Schema (draft 2020-12), so that a plugin describes its kinds' options in a few lines
/// and `hammock schema` assembles the configuration's schema from the same words. Every piece carries a
/// description: an editor shows it on hover, so it says what the value does, not only its type.
public enum JSONSchema {
    public static let draft = "https://json-schema.org/draft/2020-12/schema"

    /// A string holding `${NAME}` (filled in from the environment when the file is read) or `{{ source }}`
    /// (filled in from another source): what it becomes is known only then, so it is accepted wherever a
    /// word or a pattern is expected.
    public static let substituted: JSONValue = [
        "type": "string", "pattern": #"\$\{|\{\{"#,
        "description": "Filled in when hammock reads the file (${NAME}) or from another source ({{ source.key }}).",
    ]

    /// A string holding `${NAME}`: hammock's own keys take no `{{ }}` template, which is for kinds' options.
    public static let interpolated: JSONValue = [
        "type": "string", "pattern": #"\$\{"#, "description": "Filled in from the environment when hammock reads the file.",
    ]

    /// `schema` with every `substituted` in it made `interpolated`: for hammock's own keys.
    public static func withoutTemplates(_ schema: JSONValue) -> JSONValue {
        if schema == substituted { return interpolated }
        switch schema {
        case .object(let object): return .object(object.mapValues(withoutTemplates))
        case .array(let items): return .array(items.map(withoutTemplates))
        default: return schema
        }
    }

    public static func string(_ description: String, minLength: Int? = nil) -> JSONValue {
        var schema: JSONObject = ["type": "string", "description": .string(description)]
        if let minLength { schema["minLength"] = .number(JSONNumber(minLength)) }
        return .object(schema)
    }

    /// A string of the given form (an ECMA-262 regular expression), or a substituted one.
    public static func string(_ description: String, pattern: String) -> JSONValue {
        accepting(["type": "string", "pattern": .string(pattern)], description)
    }

    public static func boolean(_ description: String) -> JSONValue {
        ["type": "boolean", "description": .string(description)]
    }

    public static func integer(_ description: String, minimum: Int? = nil, maximum: Int? = nil) -> JSONValue {
        var schema: JSONObject = ["type": "integer", "description": .string(description)]
        if let minimum { schema["minimum"] = .number(JSONNumber(minimum)) }
        if let maximum { schema["maximum"] = .number(JSONNumber(maximum)) }
        return .object(schema)
    }

    /// One of a fixed set of words, or a substituted string.
    public static func word(_ words: [String], _ description: String) -> JSONValue {
        accepting(["enum": .array(words.map(JSONValue.string))], description)
    }

    /// A duration as the configuration writes them (`250ms`, `5s`, `2m`, `1h`, `1m30s`; see `parseDuration`).
    public static func duration(_ description: String) -> JSONValue {
        string(description, pattern: durationPattern)
    }

    public static let durationPattern = #"^ *(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ms|s|m|h))+ *$"#

    /// A whole number of bytes from `minimum`, or a size such as `64KiB` or `10MiB` (see `parseByteSize`).
    public static func size(_ description: String, minimum: Int = 1) -> JSONValue {
        [
            "anyOf": [
                ["type": "integer", "minimum": .number(JSONNumber(minimum))],
                ["type": "string", "pattern": #"^[0-9]+ ?(B|KiB|MiB|GiB|KB|MB|GB)?$"#],
                substituted,
            ],
            "description": .string(description),
        ]
    }

    /// A mapping of names to values of `values`.
    public static func map(_ description: String, values: JSONValue) -> JSONValue {
        ["type": "object", "additionalProperties": values, "description": .string(description)]
    }

    /// A list of `items`.
    public static func list(_ description: String, items: JSONValue, minItems: Int? = nil) -> JSONValue {
        var schema: JSONObject = ["type": "array", "items": items, "description": .string(description)]
        if let minItems { schema["minItems"] = .number(JSONNumber(minItems)) }
        return .object(schema)
    }

    /// A mapping with these keys and no others.
    public static func object(
        _ description: String, properties: KeyValuePairs<String, JSONValue>, required: [String] = []
    ) -> JSONValue {
        var schema: JSONObject = ["type": "object", "description": .string(description)]
        var members = JSONObject()
        for (key, value) in properties { members[key] = value }
        schema["properties"] = .object(members)
        if !required.isEmpty { schema["required"] = .array(required.map(JSONValue.string)) }
        schema["additionalProperties"] = false
        return .object(schema)
    }

    /// Any one of `choices` (the first that fits counts).
    public static func anyOf(_ description: String, _ choices: [JSONValue]) -> JSONValue {
        ["anyOf": .array(choices), "description": .string(description)]
    }

    /// `schema`, or a substituted string.
    static func accepting(_ schema: JSONObject, _ description: String) -> JSONValue {
        ["anyOf": [.object(schema), substituted], "description": .string(description)]
    }

    /// The property names of an options schema: what a plugin's option reader must know, no more, no less.
    public static func propertyNames(of schema: JSONValue) -> [String] {
        schema["properties"]?.objectValue.map { Array($0.keys) } ?? []
    }
}
