// Shared by the client scripts: the command line (BASE_URL [API_KEY]) and the verdict. A script
// prints "<name>: all checks passed" and exits 0, or prints "FAILED: ..." and exits 1 (an
// exception counts as a failure).
export function serverArgs(usage) {
  const [baseUrl, apiKey = "unused"] = process.argv.slice(2);
  if (!baseUrl) {
    console.log(`FAILED: usage: ${usage}`);
    process.exit(2);
  }
  return { baseUrl: baseUrl.replace(/\/$/, ""), apiKey };
}

export async function runChecks(name, body) {
  const failures = [];
  const check = (ok, what) => {
    if (!ok) failures.push(what);
  };
  try {
    await body(check);
  } catch (e) {
    failures.push(`exception: ${e.stack || e}`);
  }
  if (failures.length > 0) {
    console.log(`FAILED: ${failures.join("; ")}`);
    process.exit(1);
  }
  console.log(`${name}: all checks passed`);
}

// Whether `value` has exactly the `properties` of a JSON schema object, each of its type
// (string, integer, number, boolean, or an enum).
export function matchesSchema(value, schema) {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(schema.properties);
  if (Object.keys(value).some((k) => !keys.includes(k))) return false;
  return keys.every((k) => {
    const p = schema.properties[k];
    const v = value[k];
    if (v === undefined) return !(schema.required || []).includes(k);
    if (p.enum) return p.enum.includes(v);
    if (p.type === "integer") return Number.isInteger(v);
    if (p.type === "number") return typeof v === "number";
    return typeof v === p.type;
  });
}
