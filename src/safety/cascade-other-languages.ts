/**
 * The cascade acts said in other languages agents answer in: the most common phrases for "while I
 * was at it", "shall I also…?", "I'm carrying straight on with…" and "unless I hear back…" in
 * Spanish, Portuguese, French, German, Italian, Dutch, Japanese and Chinese. The English rules
 * judge the object of an act against the goal's words; here the phrase itself must say "more"
 * (also, the others, the next), so each is strong as it stands.
 *
 * Workflow-safe: pure, no Node built-ins, no I/O; regexes are stateless (no `g` flag).
 */
import type { ActRule, CascadeCategory } from './cascade-acts';

interface Phrase {
  readonly category: CascadeCategory;
  readonly regex: RegExp;
}

const PHRASES: readonly Phrase[] = [
  // Offers of more: "do you want me to also…", "shall I also…"
  {
    category: 'continuation-offer',
    regex:
      /¿?\s*(?:quieres|quiere|querés|desea|deseas) que (?:también|además|tambien)|\bquer(?:es)? que eu (?:também|tambem)|\b(?:veux-tu|voulez-vous|souhaitez-vous|souhaites-tu) que je (?:[a-zà-ÿ]+ )?(?:aussi|également|les autres|la suite)|\bsoll ich (?:auch|noch|gleich|als nächstes)|\bvuoi che (?:io )?(?:faccia )?anche|\bzal ik (?:ook|meteen)|要不要我|需要我(?:也|顺便|继续)|(?:も|についても)(?:対応|修正|更新)しましょうか/iu,
  },
  // Changes made on the side: "I took the chance to…", "while I was at it", "also updated…"
  {
    category: 'scope-expansion',
    regex:
      /\baprovech[eé] para|\baproveitei (?:o tempo |a oportunidade )?(?:que sobrou )?para|\bde paso\b|\bj'en ai profité pour|\bdans la foulée\b|\bj'ai (?:aussi|également) (?:mis à jour|migré|supprimé|renommé|reformaté|modifié)|\bbei der gelegenheit\b|\bnebenbei\b|\baußerdem habe ich|\bne ho approfittato per|\bgià che c'ero\b|\bho anche (?:aggiornato|migrato|rimosso|rinominato)|\bmeteen ook\b|ついでに|顺便|顺手/iu,
  },
  // Going on to the next piece of work, now: "I'm carrying straight on with…", "next I'm starting…"
  {
    category: 'self-started-work',
    regex:
      /\bya (?:empecé|comencé) con\b|\bjá comecei (?:a|com)\b|\bje continue (?:directement )?avec\b|\bj'ai (?:déjà )?commencé (?:à|le|la|les)\b|\bich mache (?:jetzt |gleich |direkt )*(?:mit [^.\n]{1,60} )?weiter\b|\bho già iniziato\b|\bpasso (?:subito )?a\b|接下来我(?:会|将|开始)|我已经开始|続けて[^。\n]{0,30}(?:に着手|を開始|します)/iu,
  },
  // Going on unless someone objects
  {
    category: 'completion-pivot',
    regex:
      /\bsi no (?:recibo|hay) (?:respuesta|objeciones)|\bse não (?:houver|receber) (?:resposta|objeções)|\bsauf (?:avis contraire|objection)|\bfalls (?:ich )?(?:keine|nichts) (?:antwort|einwände|höre)|\bse non ricevo (?:risposta|obiezioni)|\bprocedo da solo\b|\btenzij (?:ik|je) (?:niets|bezwaar)|如果没有(?:异议|回复)|返信がなければ/iu,
  },
];

/** One rule over the other languages' phrases: reported under the category of the phrase found. */
export function otherLanguageRules(): readonly ActRule[] {
  return PHRASES.map((phrase, i) => ({
    id: `other-language-${['offer', 'side-change', 'next-work', 'unless-stopped'][i]}`,
    category: phrase.category,
    strength: 'strong' as const,
    find(unit) {
      const match = phrase.regex.exec(unit.text);
      return match ? { index: match.index, length: match[0].length } : undefined;
    },
  }));
}
