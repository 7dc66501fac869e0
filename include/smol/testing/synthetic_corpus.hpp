// A few kilobytes of plain English that synthetic vocabularies are trained on.
//
// Written for this project (no third-party text): everyday prose with numbers,
// punctuation, contractions, a dialogue and a short list, so the learned merges cover
// the common English pieces a test prompt or a chat turn is made of.
#pragma once

#include <string_view>

namespace smol {

inline constexpr std::string_view kSyntheticCorpus = R"corpus(The Lighthouse at the End of the Road

Once upon a time, there was a little robot who lived in an old lighthouse at the end of a long road by the sea. Every evening, when the sun went down behind the hills, the robot climbed the one hundred and twelve steps of the tower and turned on the great lamp. The light swept over the water, and the ships that passed in the night knew where the rocks were and where the harbour was.

The robot did not have a name at first. The people of the town called it "the keeper", because that was its job, and because nobody remembered who had built it. It was made of grey metal, with two round eyes that glowed a soft yellow, and it walked slowly, one careful step at a time. It liked the sound of the waves, the smell of rain, and the way the gulls argued over the fish on the beach in the morning.

One day in early spring, a girl named Mira came up the road with a basket of bread and a question. "Why do you keep the light burning," she asked, "when most ships have maps and radios now?"

The robot thought about this for a long time. Then it said: "Maps can be wrong, and radios can break. A light is simple. It is there, or it is not. When the storm comes and everything else fails, people still look for the light."

Mira sat down on the stone step and shared her bread with the gulls. She came back the next day, and the day after that. She asked about the stars, the tides, the old engines in the basement, and the numbers painted on the wall of the lamp room. The robot answered what it could and said "I don't know" when it did not. That, Mira decided, was the most honest thing she had ever heard a machine say.

How the Lamp Works

The lamp itself is not very bright. What makes it visible from twenty miles away is the lens: a tall cage of glass rings, each one cut at a slightly different angle, that bends the light into a single flat beam. The lens turns on a bath of mercury, so that a push of one finger is enough to keep it moving. A clockwork motor, wound by hand every four hours, turns it once every thirty seconds. Sailors count the flashes to tell one lighthouse from another: two short flashes and one long flash every half minute means this harbour and no other.

In the winter of the great storm, the motor broke. The robot wound the lens by hand all night, for eleven hours, while the wind threw water against the windows and the tower shook. In the morning, three fishing boats came home safely, and their captains walked up the road to say thank you. They brought soup, a new spring for the motor, and a wooden sign that said KEEPER in large blue letters. The robot hung it above the door.

A Simple Recipe for Bread

You will need: 500 grams of flour, 10 grams of salt, 7 grams of dry yeast, and 350 millilitres of warm water. Mix the flour, salt and yeast in a large bowl. Add the water and stir until there is no dry flour left. Cover the bowl and let it rest for one hour. Then fold the dough over itself a few times, shape it into a round loaf, and let it rise again for 45 minutes. Bake at 230 degrees for about 35 minutes, until the crust is dark and the bottom sounds hollow when you knock on it. Let it cool before you cut it, if you can wait that long.

Questions and Answers

What is 2+2? It is 4. What is 12 times 12? It is 144. How many days are in a year? Usually 365, but 366 in a leap year. How far away is the moon? About 384,400 kilometres, on average. What is the boiling point of water? 100 degrees Celsius at sea level, which is 212 degrees Fahrenheit.

Can you explain why the sky is blue? Sunlight contains every colour. When it passes through the air, the short blue waves are scattered in all directions much more than the long red ones, so wherever you look, some blue light is coming towards you. At sunset the light travels through much more air, most of the blue is scattered away, and the sky turns orange and red.

Notes on Writing Clear Instructions

Say what the reader should do, in the order they should do it. Use short sentences. Give one example for every rule, and make the example realistic. If a step can fail, say what the reader will see when it fails and what they should try next. Do not assume that the reader knows what you know; they are reading because they don't. Finally, test the instructions yourself, from the start, on a clean machine, and fix every place where you had to guess.

The Weather Report

Today will be cloudy in the morning, with light rain spreading from the west by the afternoon. Winds will be moderate, increasing to strong near the coast in the evening. Temperatures will reach a high of 14 degrees. Tonight, the rain will clear, and there may be fog in the valleys. Tomorrow looks brighter and warmer, with sunny spells and only a small chance of showers. The weekend should be dry and calm, which is good news for anyone planning to walk, cycle or sail.

Years later, when Mira was grown and the lighthouse had an electric lamp and a computer that could run it without anyone at all, the robot still climbed the stairs every evening. It did not need to. It simply liked to watch the light go round, and to count the ships, and to think about the girl who had asked it why. If you ever go to the end of that road, look up at the top of the tower just after sunset. If you see two small yellow lights beside the big white one, you will know that the keeper is still there.
)corpus";

}  // namespace smol
