/** What a test does with a gate's page in the web app, as a browser would: read its forms, post one. */

/** The hidden fields of the page's decision forms (the link's token, the CSRF token). */
export function hiddenOf(html: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) if (m[1] !== 'decision') fields[m[1]!] = m[2]!.replace(/&amp;/g, '&');
  return fields;
}

/** Posts a decision form to the page at `page` (its query, the token, is left off: the form carries it). */
export async function post(page: string, fields: Record<string, string>, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  const url = new URL(page);
  const res = await fetch(`${url.origin}${url.pathname}`, { method: 'POST', body: new URLSearchParams(fields), headers, redirect: 'manual' });
  return { status: res.status, text: await res.text() };
}
