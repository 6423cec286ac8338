import HammockCore
import HammockJSON
import Testing

/// What `hammock plugin check` says of a plugin's options schema, in-process.
@Suite struct JSONSchemaCheckTests {
    private func problems(_ schema: JSONValue) -> [String: String] {
        Dictionary(JSONSchemaCheck.problems(in: schema).map { ($0.pointer.description, $0.message) }, uniquingKeysWith: { $0 + "; " + $1 })
    }

    @Test func aWellFormedSchemaHasNoProblem() {
        let schema: JSONValue = [
            "type": "object",
            "properties": [
                "city": ["type": "string", "minLength": 1, "description": "The city."],
                "units": ["enum": ["metric", "imperial"]],
                "days": ["type": ["integer", "string"], "minimum": 1, "maximum": 16],
                "tags": ["type": "array", "items": ["type": "string"], "uniqueItems": true],
                "anything": true,
            ],
            "required": ["city"],
            "additionalProperties": false,
            "allOf": [["if": ["required": ["days"]], "then": ["required": ["units"]]]],
        ]
        #expect(problems(schema).isEmpty)
    }

    @Test func theOptionsSchemaMustBeAnObject() {
        #expect(problems(["string"]) == ["": "the options schema must be a JSON object, found an array"])
        #expect(problems(true)[""]?.contains("must be a JSON object") == true)
    }

    @Test func eachKeywordHasItsType() {
        let schema: JSONValue = [
            "type": "strin",
            "properties": ["a": ["type": ["string", "string"]], "b": 5, "c": ["minLength": -1]],
            "required": "a",
            "anyOf": [],
            "description": 3,
            "additionalProperties": "no",
            "uniqueItems": "yes",
            "minimum": "1",
            "multipleOf": 0,
            "propertes": [:],
        ]
        let found = problems(schema)
        #expect(found["/type"] == #"type "strin" is not a JSON Schema type (did you mean "string"?); types: null, boolean, object, array, number, string, integer"#)
        #expect(found["/properties/a/type"] == "type names a type twice")
        #expect(found["/properties/b"] == "a schema must be an object or true/false, found a number")
        #expect(found["/properties/c/minLength"]?.hasPrefix("minLength must be a whole number of at least 0") == true)
        #expect(found["/required"]?.hasPrefix("required must be a list of property names") == true)
        #expect(found["/anyOf"] == "anyOf must be a non-empty list of schemas, found an array")
        #expect(found["/description"] == "description must be a string, found a number")
        #expect(found["/additionalProperties"] == "a schema must be an object or true/false, found a string")
        #expect(found["/uniqueItems"] == "uniqueItems must be true or false, found a string")
        #expect(found["/minimum"] == "minimum must be a number, found a string")
        #expect(found["/multipleOf"] == "multipleOf must be greater than 0")
        #expect(found["/propertes"] == #"propertes is not a JSON Schema keyword; did you mean "properties"?"#)
        #expect(found.count == 12)
    }

    /// Draft 2020-12 lets a schema carry keywords of its own; only a near miss of a real one is called out.
    @Test func anUnknownKeywordFarFromAnyIsLeftAlone() {
        #expect(problems(["type": "object", "x-hammock-secret": true]).isEmpty)
    }
}
